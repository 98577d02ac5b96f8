package lab

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"surflare-watchdog/src/config"
)

// The generated lab config must be a valid daemon config that names only
// options the daemon knows and points every probe at a lab host.
func TestLabConfigIsValidAndStaysInTheLab(t *testing.T) {
	l, err := newLab(Options{Prefix: "swltest"})
	if err != nil {
		t.Fatal(err)
	}
	f := labConfig(l)
	for _, s := range []string{"surflare.main.mode=global", "surflare.paths.ubus_socket=/tmp/other.sock", "surflare.main.candidate=Chicago"} {
		if err := f.set(s); err != nil {
			t.Fatal(err)
		}
	}
	text := f.String()
	c, warns, err := config.Parse("lab/surflare", []byte(text))
	if err != nil {
		t.Fatalf("lab config rejected: %v\n%s", err, text)
	}
	if len(warns) > 0 {
		t.Errorf("lab config has warnings (option names out of sync with src/config?): %v", warns)
	}
	if string(c.Main.Mode) != "global" || c.Paths.UbusSocket != "/tmp/other.sock" {
		t.Errorf("overrides not applied: mode=%v ubus=%v", c.Main.Mode, c.Paths.UbusSocket)
	}
	if len(c.Main.Candidates) != 1 || c.Main.Candidates[0] != "Chicago" {
		t.Errorf("--set on a list option should replace it, as uci set does: %v", c.Main.Candidates)
	}
	if !strings.HasPrefix(c.Paths.SurflareBin, l.Dir) {
		t.Errorf("surflare_bin %q is not the lab's fake", c.Paths.SurflareBin)
	}
	if len(c.Probes) == 0 {
		t.Fatal("no probes in lab config")
	}
	for _, p := range c.Probes {
		u, err := url.Parse(p.URL)
		if err != nil {
			t.Fatal(err)
		}
		a, err := netip.ParseAddr(u.Hostname())
		if err != nil || !(netip.MustParsePrefix("198.18.0.0/15").Contains(a)) {
			t.Errorf("probe %s targets %q, not a lab host", p.Name, p.URL)
		}
	}
}

func TestSetRejectsBadOverrides(t *testing.T) {
	l, _ := newLab(Options{Prefix: "swltest"})
	f := labConfig(l)
	for _, bad := range []string{"main.mode=global", "surflare.main.mode", "network.lan.ipaddr=1", "surflare.nosuch.opt=1", "surflare..x=1"} {
		if err := f.set(bad); err == nil {
			t.Errorf("--set %q accepted", bad)
		}
	}
	if err := f.set("surflare.tv=bypass"); err != nil {
		t.Fatal(err)
	}
	if err := f.set("surflare.tv.mac=" + ClientMAC(1)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.String(), "config bypass 'tv'\n\toption mac '"+ClientMAC(1)+"'") {
		t.Errorf("added section missing:\n%s", f.String())
	}
}
