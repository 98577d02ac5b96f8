package api

import (
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/config"
)

func TestLoadTokenFileCreatesPrivateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "etc", "surflare", "web.token")
	tok, err := LoadTokenFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %04o, want 0600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Errorf("token directory mode %04o, want 0700", di.Mode().Perm())
	}
	again, err := LoadTokenFile(path, nil)
	if err != nil || again != tok {
		t.Errorf("second load: %q, %v; want the same token %q", again, err, tok)
	}
	ts := NewTokens(nil)
	if err := ts.AddStatic(tok); err != nil {
		t.Fatalf("generated token refused: %v", err)
	}
	if !ts.Valid(tok) || ts.Valid(strings.ToLower(tok)) {
		t.Error("the file's token is not accepted exactly")
	}
}

func TestLoadTokenFileTightensModeAndRejectsJunk(t *testing.T) {
	dir := t.TempDir()
	loose := filepath.Join(dir, "loose")
	os.WriteFile(loose, []byte("  a-user-chosen-token-1234\n"), 0o644)
	tok, err := LoadTokenFile(loose, slog.New(slog.DiscardHandler))
	if err != nil || tok != "a-user-chosen-token-1234" {
		t.Fatalf("loose file: %q, %v", tok, err)
	}
	if fi, _ := os.Stat(loose); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after load %04o, want 0600", fi.Mode().Perm())
	}
	for name, content := range map[string]string{"empty": "", "short": "abc\n", "spaces": "two words in a token file\n"} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o600)
		if _, err := LoadTokenFile(p, nil); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s token file: err %v, want an error naming the file", name, err)
		}
	}
	if _, err := LoadTokenFile(dir, nil); err == nil {
		t.Error("a directory was accepted as the token file")
	}
}

func TestMintBoundsAndExpiry(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ts := NewTokens(func() time.Time { return now })
	first := ts.Mint(time.Hour)
	zero := ts.Mint(0) // clamped to a second, not "forever"
	if !ts.Valid(zero) {
		t.Fatal("a token with ttl 0 is not valid at once")
	}
	now = now.Add(2 * time.Second)
	if ts.Valid(zero) {
		t.Error("a token with ttl 0 lives longer than a second")
	}
	for range 2 * maxMinted {
		ts.Mint(2 * time.Hour)
	}
	if len(ts.minted) > maxMinted {
		t.Errorf("%d tokens kept, want at most %d", len(ts.minted), maxMinted)
	}
	if ts.Valid(first) {
		t.Error("the token closest to expiry survived the overflow")
	}
	if ts.Valid("") {
		t.Error("empty token valid")
	}
}

func TestListenAddress(t *testing.T) {
	lan := netip.MustParseAddr("198.18.1.1")
	for _, c := range []struct {
		web  config.Web
		lan  netip.Addr
		want string
	}{
		{config.Web{Port: 9099}, lan, "198.18.1.1:9099"},
		{config.Web{Port: 9099}, netip.Addr{}, "127.0.0.1:9099"},
		{config.Web{Port: 8080, Listen: netip.MustParseAddr("fd00::1")}, lan, "[fd00::1]:8080"},
		{config.Web{}, netip.Addr{}, "127.0.0.1:9099"},
	} {
		if got := ListenAddress(c.web, c.lan); got != c.want {
			t.Errorf("ListenAddress(%+v, %v) = %s, want %s", c.web, c.lan, got, c.want)
		}
	}
}
