package surflare

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const secret = "s3cret pass"

func pw() (string, error) { return secret, nil }

func TestLoginArgvClassification(t *testing.T) {
	cases := []struct {
		body  string
		ok    bool
		fatal bool
	}{
		{"exit 0", true, false},
		{"echo 'Error: 429 Too Many Requests'; exit 1", false, true},
		{"echo 'invalid username/password' >&2; exit 1", false, true},
		{"echo 'Subscription expired'; exit 1", false, true},
		{"echo 'Device limit reached'; exit 1", false, true},
		{"echo '✘ Account check failed — Could not verify account status. Check network.'; exit 1", false, true},
		{"echo 'dial tcp: connection refused'; exit 1", false, false},
	}
	for _, tc := range cases {
		bin, dir := fakeCLI(t, tc.body)
		err := New(Options{Bin: bin, LoginMode: LoginArgv, Username: "a@b.c", Password: pw}).Login(context.Background())
		if tc.ok != (err == nil) || IsFatal(err) != tc.fatal {
			t.Errorf("%q: err = %v, want ok=%v fatal=%v", tc.body, err, tc.ok, tc.fatal)
		}
		want := []string{"login", "-u", "a@b.c", "-p", secret, "--remember"}
		if got := readArgs(t, dir); !slices.Equal(got, want) {
			t.Errorf("argv = %q, want %q", got, want)
		}
	}
}

func TestLoginHangIsRetryableAndKilled(t *testing.T) {
	for _, mode := range []LoginMode{LoginArgv, LoginPTY} {
		bin, _ := fakeCLI(t, "sleep 300")
		start := time.Now()
		err := New(Options{Bin: bin, LoginMode: mode, LoginTimeout: 300 * time.Millisecond,
			Username: "a@b.c", Password: pw}).Login(context.Background())
		if err == nil || IsFatal(err) || !strings.Contains(err.Error(), "timed out") {
			t.Errorf("%s: err = %v, want a retryable timeout", mode, err)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("%s: login took %v despite a 300ms timeout", mode, el)
		}
	}
}

func TestLoginPTYAnswersPrompt(t *testing.T) {
	// Like the real CLI: prompt and read on the controlling terminal.
	bin, dir := fakeCLI(t, `printf 'Password: ' > /dev/tty
IFS= read -r pw < /dev/tty
printf '%s' "$pw" > $DIR/got
if [ "$pw" = "`+secret+`" ]; then echo 'Logged in'; exit 0; fi
echo 'invalid username/password'; exit 1`)
	err := New(Options{Bin: bin, Username: "a@b.c", Password: pw}).Login(context.Background())
	if err != nil {
		t.Fatalf("pty login: %v", err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "got"))
	if string(got) != secret {
		t.Errorf("CLI read password %q, want %q", got, secret)
	}
	args := readArgs(t, dir)
	if want := []string{"login", "-u", "a@b.c", "--remember"}; !slices.Equal(args, want) {
		t.Errorf("argv = %q, want %q (no password)", args, want)
	}

	wrong := func() (string, error) { return "nope-" + secret, nil }
	err = New(Options{Bin: bin, Username: "a@b.c", Password: wrong}).Login(context.Background())
	if !IsFatal(err) {
		t.Fatalf("wrong password: err = %v, want fatal", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("error leaks the password (terminal echo): %v", err)
	}
}

func TestLoginWithoutCredentialsIsFatal(t *testing.T) {
	bin, _ := fakeCLI(t, "exit 0")
	if err := New(Options{Bin: bin}).Login(context.Background()); !IsFatal(err) {
		t.Errorf("err = %v, want fatal (no credentials)", err)
	}
}

// A password source that fails says why; the reason must not be replaced by
// a misleading "not configured".
func TestLoginPasswordSourceErrorIsPassedOn(t *testing.T) {
	c := New(Options{Bin: "/nonexistent/surflare", Username: "you@example.com",
		Password: func() (string, error) {
			return "", errors.New("/etc/surflare/credentials is readable by others: chmod 600 /etc/surflare/credentials")
		}})
	err := c.Login(context.Background())
	if !IsFatal(err) {
		t.Fatalf("Login = %v, want a fatal login error", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "chmod 600") || strings.Contains(msg, "not configured") || strings.Contains(msg, "no Surflare username") {
		t.Errorf("Login error = %q, want the source's own reason only", msg)
	}
}
