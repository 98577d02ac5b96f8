package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runFirewallCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := firewallMain(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// writeLabConfig writes a UCI config pointing at chnroute files in dir.
func writeLabConfig(t *testing.T, dir, extra string) string {
	t.Helper()
	os.WriteFile(filepath.Join(dir, "cn4.txt"), []byte("# lab domestic\n198.19.0.0/16\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "cn6.txt"), []byte("fd00:19::/32\n"), 0o644)
	cfg := fmt.Sprintf(`config surflare 'main'
	option role 'router'
	option lan_interface 'br-lan'
	list endpoint '198.18.40.1'
%s
config dns 'dns'
	list domestic_upstream '198.19.0.53'
	list blocked_doh '198.18.50.2'

config paths 'paths'
	option chnroute_v4 '%s'
	option chnroute_v6 '%s'

config bypass 'tv'
	option name 'tv'
	option mac '02:00:00:00:01:0b'
`, extra, filepath.Join(dir, "cn4.txt"), filepath.Join(dir, "cn6.txt"))
	path := filepath.Join(dir, "surflare")
	os.WriteFile(path, []byte(cfg), 0o644)
	return path
}

func TestFirewallPlanFromConfig(t *testing.T) {
	dir := t.TempDir()
	leases := filepath.Join(dir, "leases")
	os.WriteFile(leases, []byte("1764430000 02:00:00:00:01:0b 198.18.1.11 tv *\n"), 0o644)
	cfg := writeLabConfig(t, dir, "\toption mode 'global'\n\toption ipv6 'proxy'\n")
	code, out, errOut := runFirewallCLI("plan", "--config", cfg, "--leases", leases)
	if code != exitOK {
		t.Fatalf("plan: code %d, stderr %s", code, errOut)
	}
	for _, want := range []string{
		"role=router mode=global ipv6=proxy",
		"table inet killswitch {", "table ip sw_lan_tproxy {", "table ip dns_enforce {", "table ip6 sw_lan_tproxy6 {",
		"elements = { 198.19.0.0/16 }", "elements = { fd00:19::/32 }", // chnroute files
		"elements = { 02:00:00:00:01:0b }", "elements = { 198.18.1.11 }", // bypass MAC and its lease
		"198.18.40.1", "198.19.0.53", "198.18.50.2",
		"# insert rule inet surflare <chain> ip daddr @sw_cn_direct4 accept",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q", want)
		}
	}
}

func TestFirewallPlanErrors(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runFirewallCLI("plan", "--config", filepath.Join(dir, "missing")); code != exitFailure || !strings.Contains(errOut, "missing") {
		t.Errorf("missing config: code %d, %q", code, errOut)
	}
	cfg := writeLabConfig(t, dir, "")
	os.WriteFile(filepath.Join(dir, "cn4.txt"), []byte("198.19.0.0/16\nbogus\n"), 0o644)
	if code, _, errOut := runFirewallCLI("plan", "--config", cfg); code != exitFailure || !strings.Contains(errOut, "cn4.txt:2:") {
		t.Errorf("broken chnroute: code %d, %q", code, errOut)
	}
	os.Remove(filepath.Join(dir, "cn4.txt"))
	if code, _, errOut := runFirewallCLI("plan", "--config", cfg); code != exitOK || !strings.Contains(errOut, "routes update") {
		t.Errorf("missing chnroute must be a warning: code %d, %q", code, errOut)
	}
	if code, _, _ := runFirewallCLI("nonsense"); code != exitUsage {
		t.Errorf("unknown subcommand: code %d", code)
	}
	if code, out, _ := runFirewallCLI("plan", "--help"); code != exitOK || !strings.Contains(out, "-config") {
		t.Errorf("plan --help: code %d, %q", code, out)
	}
	if code, _, errOut := runFirewallCLI("trace", "start"); code != exitUsage || !strings.Contains(errOut, "--addr") {
		t.Errorf("trace start without a filter: code %d, %q", code, errOut)
	}
}

func TestRoutesUpdate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "apnic|CN|ipv4|1.0.1.0|256|20110414|allocated\napnic|CN|ipv4|1.0.2.0|512|20110414|allocated\napnic|CN|ipv6|240e::|18|20130703|allocated\n")
	}))
	defer srv.Close()
	dir := t.TempDir()
	out4, out6 := filepath.Join(dir, "cn4.txt"), filepath.Join(dir, "sub", "cn6.txt")
	var out, errb bytes.Buffer
	code := routesMain(context.Background(), []string{"update", "--config", filepath.Join(dir, "none"), "--url", srv.URL, "--out4", out4, "--out6", out6}, &out, &errb)
	if code != exitOK {
		t.Fatalf("routes update: %d %s", code, errb.String())
	}
	b4, _ := os.ReadFile(out4)
	b6, _ := os.ReadFile(out6)
	if string(b4) != "1.0.1.0/24\n1.0.2.0/23\n" || string(b6) != "240e::/18\n" {
		t.Fatalf("files: %q %q", b4, b6)
	}
	// Not a terminal: the step is a plain line of its own, no carriage returns.
	if !strings.HasPrefix(out.String(), "downloading "+srv.URL+"…\n") || strings.Contains(out.String(), "\r") {
		t.Errorf("progress: output %q", out.String())
	}
	if !strings.Contains(out.String(), "2 IPv4 prefixes") {
		t.Errorf("output %q", out.String())
	}
}
