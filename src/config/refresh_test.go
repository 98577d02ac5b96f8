package config

import (
	"testing"
	"time"
)

// main.login_refresh: 30 min by default, 0 turns it off, anything between
// 0 and a few seconds is refused with the file's line and why.
func TestLoginRefreshOption(t *testing.T) {
	if got := Default().Main.LoginRefresh; got != 30*time.Minute {
		t.Errorf("default login_refresh %s, want 30m", got)
	}
	for text, want := range map[string]time.Duration{"0": 0, "1800": 30 * time.Minute, "5": 5 * time.Second} {
		c, _ := mustParse(t, "config surflare 'main'\n\toption login_refresh '"+text+"'\n")
		if c.Main.LoginRefresh != want {
			t.Errorf("login_refresh %q = %s, want %s", text, c.Main.LoginRefresh, want)
		}
	}
	for text, want := range map[string]string{
		"2":    "/etc/config/surflare:3: main.login_refresh: must be 0 (off) or at least 5s: a login every few seconds looks like an attack to the account API (HTTP 429)",
		"-1":   "/etc/config/surflare:3: main.login_refresh: -1s is out of range: must be between 0s and 24h0m0s",
		"soon": `/etc/config/surflare:3: main.login_refresh: "soon" is not a number of seconds`,
	} {
		_, _, err := Parse("/etc/config/surflare", []byte("config surflare 'main'\n\toption mode 'rule'\n\toption login_refresh '"+text+"'\n"))
		if err == nil || err.Error() != want {
			t.Errorf("login_refresh %q: err = %v\nwant %s", text, err, want)
		}
	}
}
