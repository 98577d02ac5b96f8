package firewall

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// stripHandles removes what differs between two namespaces holding the same
// ruleset (object handles) and the metainfo line, and pretty-prints.
func normalizeJSON(t *testing.T, js string) string {
	t.Helper()
	var doc map[string][]map[string]map[string]any
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("nft -j output: %v\n%s", err, js)
	}
	var out []map[string]map[string]any
	for _, item := range doc["nftables"] {
		if _, ok := item["metainfo"]; ok {
			continue
		}
		for _, obj := range item {
			delete(obj, "handle")
		}
		out = append(out, item)
	}
	b, _ := json.MarshalIndent(out, "", " ")
	return string(b)
}

func TestApplyMatchesRenderedPlanAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	specs := map[string]Spec{"router-block": labSpec()}
	s := labSpec()
	s.IPv6 = IPv6Proxy
	s.CNDirect6 = mustPrefixes("fd00:19::/32")
	s.Bypass = []Device{{Name: "tv", MAC: mustMAC("02:00:00:00:01:0b")}}
	specs["router-proxy6"] = s
	s = labSpec()
	s.Role = RoleLaptop
	specs["laptop"] = s
	s = labSpec()
	s.ProxyDown = true
	specs["tombstone"] = s
	s = labSpec()
	s.RouteLayer = true
	specs["router-layer"] = s
	s.Role = RoleLaptop
	specs["laptop-layer"] = s
	for name, s := range specs {
		t.Run(name, func(t *testing.T) {
			byNFT, byApply := newNS(t, "nft"), newNS(t, "apply")
			text, err := Render(s)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "plan.nft")
			os.WriteFile(path, []byte(text), 0o644)
			byNFT.nft("-f", path)

			fw := New(WithNetNS(byApply.fd()))
			ch, err := fw.Apply(ctx, s)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if ch.Empty() {
				t.Fatal("first Apply reported no changes")
			}
			want := normalizeJSON(t, byNFT.nft("-j", "list", "ruleset"))
			before := byApply.nft("-j", "list", "ruleset")
			if got := normalizeJSON(t, before); got != want {
				t.Fatalf("kernel state after Apply differs from the rendered plan loaded by nft:\n--- plan (nft -f)\n%s\n--- Apply\n%s", want, got)
			}
			ch, err = fw.Apply(ctx, s)
			if err != nil || !ch.Empty() {
				t.Fatalf("second Apply = %v, %v; want no changes", ch, err)
			}
			if after := byApply.nft("-j", "list", "ruleset"); after != before {
				t.Fatalf("second Apply changed the ruleset:\n%s\n---\n%s", before, after)
			}
		})
	}
}
