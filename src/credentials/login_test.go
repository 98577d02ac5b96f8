package credentials

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"surflare-watchdog/src/surflare"
)

// fakeLoginCLI is a `surflare` that, like the real one, reads the password
// at a "Password: " prompt on its terminal (or takes -p), then waits on a
// FIFO so the test can inspect every process's command line while it runs.
// It says it got that far through another FIFO: no polling, no sleeps.
func fakeLoginCLI(t *testing.T) (bin, dir string) {
	t.Helper()
	dir = t.TempDir()
	for _, fifo := range []string{"ready", "go"} {
		if err := syscall.Mkfifo(filepath.Join(dir, fifo), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := `#!/bin/sh
DIR=` + dir + `
[ "$1" = login ] || exit 2
case " $* " in
*" -p "*) ;;
*) printf 'Password: ' > /dev/tty; IFS= read -r pw < /dev/tty; printf '%s' "$pw" > $DIR/got ;;
esac
echo > $DIR/ready
read -r x < $DIR/go
echo 'Logged in'
`
	bin = filepath.Join(dir, "surflare")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, dir
}

// cmdlines returns the command line of every process on the machine.
func cmdlines() []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && len(b) > 0 {
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// loginAndScan runs a login with the stored credentials and, while the CLI
// is alive and has the password, reads every /proc/*/cmdline. It returns
// the command lines that hold the password and whether the CLI was seen.
func loginAndScan(t *testing.T, mode surflare.LoginMode) (leaks []string, sawCLI bool) {
	t.Helper()
	opts := testOpts(t)
	if err := Store(context.Background(), opts, "", planted); err != nil {
		t.Fatal(err)
	}
	bin, dir := fakeLoginCLI(t)
	client := surflare.New(surflare.Options{Bin: bin, Username: opts.Username, Password: Password(opts), LoginMode: mode, LoginTimeout: 20 * time.Second})
	done := make(chan error, 1)
	go func() { done <- client.Login(context.Background()) }()

	ready := make(chan struct{})
	go func() {
		// Opening a FIFO for reading blocks until the CLI opens it to write.
		if b, err := os.ReadFile(filepath.Join(dir, "ready")); err == nil && len(b) > 0 {
			close(ready)
		}
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("login ended before the CLI had the password: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the fake CLI never got to the point where it holds the password")
	}
	for _, c := range cmdlines() {
		if strings.Contains(c, bin) {
			sawCLI = true
		}
		if strings.Contains(c, planted) {
			leaks = append(leaks, c)
		}
	}
	// Let the CLI finish.
	f, err := os.OpenFile(filepath.Join(dir, "go"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\n")
	f.Close()
	if err := <-done; err != nil {
		t.Fatalf("login: %v", err)
	}
	if mode == surflare.LoginPTY {
		if got, _ := os.ReadFile(filepath.Join(dir, "got")); string(got) != planted {
			t.Errorf("the CLI read %q at its prompt, want the stored password", got)
		}
	}
	return leaks, sawCLI
}

// The stored password reaches `surflare login` through its terminal prompt
// and is in no process's command line while the login runs.
func TestStoredPasswordNeverInACommandLine(t *testing.T) {
	leaks, saw := loginAndScan(t, surflare.LoginPTY)
	if !saw {
		t.Fatal("the scan did not see the CLI's own command line: it proves nothing")
	}
	if len(leaks) > 0 {
		t.Errorf("password in command lines: %q", leaks)
	}
}

// The same scan finds the password in argv mode: the scan can fail.
func TestArgvModeIsVisibleInCommandLines(t *testing.T) {
	leaks, saw := loginAndScan(t, surflare.LoginArgv)
	if !saw || len(leaks) == 0 {
		t.Fatalf("argv login: saw CLI %v, leaks %q — the scan cannot detect a password", saw, leaks)
	}
}

// Without a stored password the login is a fatal error before the CLI
// runs: the watchdog shows "credentials missing" instead of retrying.
func TestMissingPasswordStopsLoginBeforeTheCLI(t *testing.T) {
	opts := testOpts(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "surflare")
	os.WriteFile(bin, []byte("#!/bin/sh\n: > "+dir+"/ran\n"), 0o755)
	err := surflare.New(surflare.Options{Bin: bin, Username: opts.Username, Password: Password(opts)}).Login(context.Background())
	if !surflare.IsFatal(err) || !strings.Contains(err.Error(), "credentials missing") {
		t.Fatalf("login without a password: %v, want a fatal 'credentials missing'", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the CLI ran without a password")
	}
	// An unsafe file is refused the same way, and the error says why.
	writeRaw(t, opts.File, planted, 0o644)
	err = surflare.New(surflare.Options{Bin: bin, Username: opts.Username, Password: Password(opts)}).Login(context.Background())
	if !surflare.IsFatal(err) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("login with a 0644 file: %v", err)
	}
	assertNoLeak(t, "login error", err.Error())
}
