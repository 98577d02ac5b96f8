package internet

import (
	"context"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/lab"
)

// A chnroute refresh in the lab downloads from the domestic web server and
// gets exactly the lab's domestic prefixes (the US record is left out).
func TestDomesticWebServesTheChnrouteFile(t *testing.T) {
	w := startWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	url := "http://" + hostPort(w.cfg.DomesticWeb[0], w.cfg.HTTPPort) + lab.ChnroutePath
	v4, v6, err := firewall.FetchAPNIC(ctx, http.DefaultClient, url, "CN")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v4, w.cfg.Chnroute) || len(v6) != 0 {
		t.Errorf("chnroute from the lab: v4 %v v6 %v, want %v", v4, v6, w.cfg.Chnroute)
	}
	if us, _, err := firewall.FetchAPNIC(ctx, http.DefaultClient, url, "US"); err != nil || !slices.Equal(us, []netip.Prefix{chnrouteForeign}) {
		t.Errorf("US records: %v %v", us, err)
	}
	// Everything else still echoes the caller.
	resp, err := http.Get("http://" + hostPort(w.cfg.DomesticWeb[0], w.cfg.HTTPPort) + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("domestic web / is no longer the echo: %s", resp.Header.Get("Content-Type"))
	}
}

func TestAPNICFileIPv6AndSizes(t *testing.T) {
	cn := []netip.Prefix{netip.MustParsePrefix("198.19.0.0/16"), netip.MustParsePrefix("10.1.2.0/23"), netip.MustParsePrefix("fd00:19::/32")}
	v4, v6, err := firewall.ParseAPNIC(strings.NewReader(APNICFile(cn)), "CN")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v4, cn[:2]) || !slices.Equal(v6, cn[2:]) {
		t.Errorf("round trip: %v %v, want %v", v4, v6, cn)
	}
}
