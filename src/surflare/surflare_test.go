package surflare

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/runfiles"

	"golang.org/x/sys/unix"
)

// fakeCLI writes a shell script standing in for the vendor CLI. The script
// records its arguments, one per line, in $DIR/args.
func fakeCLI(t *testing.T, body string) (bin, dir string) {
	t.Helper()
	dir = t.TempDir()
	bin = filepath.Join(dir, "surflare")
	script := "#!/bin/sh\nDIR=" + dir + "\nprintf '%s\\n' \"$@\" > $DIR/args\n" + body + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, dir
}

func readArgs(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "args"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func TestStatusClassification(t *testing.T) {
	cases := []struct {
		name, body string
		want       State
		node       string
	}{
		{"connected", "printf 'state: connected\\nnode: Los Angeles\\ntransit: auto\\n'", StateConnected, "Los Angeles"},
		{"disconnected", "echo 'state: disconnected'", StateDisconnected, ""},
		{"not logged in", "echo 'Error: not logged in'; exit 1", StateAuthNeeded, ""},
		{"session expired exit 0", "echo 'Session expired, please log in'", StateAuthNeeded, ""},
		{"subscription", "echo 'state: disconnected'; echo 'Subscription not active'", StateSubscriptionInactive, ""},
		{"non-zero without text", "exit 3", StateAuthNeeded, ""},
		{"garbage", "echo 'hello there'", StateUnknown, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bin, _ := fakeCLI(t, tc.body)
			st, err := New(Options{Bin: bin}).Status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.State != tc.want || st.Node != tc.node {
				t.Errorf("Status = %+v, want state %s node %q", st, tc.want, tc.node)
			}
		})
	}
}

// pidGone reports whether pid no longer runs (gone, or a zombie waiting for
// an init that does not reap).
func pidGone(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !pidGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d survived the timeout kill", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStatusTimeoutKillsWholeGroup(t *testing.T) {
	// The CLI hangs and has a child of its own: both must die.
	bin, dir := fakeCLI(t, "sleep 300 & echo $! > $DIR/child\nwait")
	start := time.Now()
	st, err := New(Options{Bin: bin, Timeout: 300 * time.Millisecond}).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateAuthNeeded || !st.TimedOut || st.ExitCode != ExitTimeout {
		t.Errorf("Status = %+v, want auth needed after timeout (exit 124)", st)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("status took %v despite a 300ms timeout", el)
	}
	data, err := os.ReadFile(filepath.Join(dir, "child"))
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	waitGone(t, child)
}

func TestCallerCancelIsAnError(t *testing.T) {
	bin, _ := fakeCLI(t, "sleep 300")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	if _, err := New(Options{Bin: bin}).Status(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// inheritableFDs lists our own descriptors without FD_CLOEXEC: whatever
// started the test may leak some to us, and they are not ours to judge.
func inheritableFDs(t *testing.T) map[int]bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]bool{}
	for _, e := range ents {
		n, _ := strconv.Atoi(e.Name())
		if fl, err := unix.FcntlInt(uintptr(n), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC == 0 {
			out[n] = true
		}
	}
	return out
}

func TestNoDescriptorInherited(t *testing.T) {
	lock, err := runfiles.AcquireLock(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	allowed := inheritableFDs(t)
	bin, _ := fakeCLI(t, `ls -l /proc/$$/fd; echo 'state: connected'`)
	r, err := New(Options{Bin: bin}).run(context.Background(), time.Second, "status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.out, " 2 -> ") {
		t.Fatalf("fd listing missing:\n%s", r.out)
	}
	for _, l := range strings.Split(r.out, "\n") {
		before, target, ok := strings.Cut(l, " -> ")
		if !ok {
			continue
		}
		f := strings.Fields(before)
		n, _ := strconv.Atoi(f[len(f)-1])
		// 0-2 are the child's stdio; the shell itself opens its script.
		if n > 2 && !allowed[n] && !strings.HasSuffix(target, "/surflare") {
			t.Errorf("child inherited fd %d -> %s", n, target)
		}
		if strings.Contains(target, runfiles.LockFile) {
			t.Errorf("child inherited the instance lock: fd %d", n)
		}
	}
}

func TestConnectArgsAndErrors(t *testing.T) {
	bin, dir := fakeCLI(t, "exit 0")
	c := New(Options{Bin: bin})
	if err := c.Connect(context.Background(), "Los Angeles", "rule", "Tokyo"); err != nil {
		t.Fatal(err)
	}
	want := []string{"connect", "--node", "Los Angeles", "--mode", "rule", "--transit", "Tokyo", "--daemon"}
	if got := readArgs(t, dir); !slices.Equal(got, want) {
		t.Errorf("argv = %q, want %q", got, want)
	}

	bin, _ = fakeCLI(t, "echo '✘ Account check failed — Could not verify account status. Check network.' >&2; exit 1")
	err := New(Options{Bin: bin}).Connect(context.Background(), "Dallas", "", "")
	if !errors.Is(err, ErrAccountCheck) || !strings.Contains(err.Error(), "Check network") {
		t.Errorf("err = %v, want ErrAccountCheck with the CLI's message", err)
	}
	bin, _ = fakeCLI(t, "echo 'not logged in'; exit 1")
	if err := New(Options{Bin: bin}).Connect(context.Background(), "Dallas", "", ""); !errors.Is(err, ErrAuthNeeded) {
		t.Errorf("err = %v, want ErrAuthNeeded", err)
	}
	bin, _ = fakeCLI(t, "sleep 300")
	if err := New(Options{Bin: bin, ConnectTimeout: 200 * time.Millisecond}).Connect(context.Background(), "Dallas", "", ""); !errors.Is(err, ErrTimeout) {
		t.Errorf("err = %v, want ErrTimeout", err)
	}
}

func TestConnectReturnsWhileDaemonKeepsRunning(t *testing.T) {
	// `connect --daemon` leaves a detached proxy behind that still holds
	// our output pipe; the call must return promptly, not when it exits.
	bin, dir := fakeCLI(t, "setsid sleep 300 & echo $! > $DIR/daemon\necho launched")
	start := time.Now()
	if err := New(Options{Bin: bin}).Connect(context.Background(), "Dallas", "", ""); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("connect took %v", el)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "daemon"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if pidGone(pid) {
		t.Error("the detached daemon was killed")
	}
	if p, _ := os.FindProcess(pid); p != nil {
		p.Kill()
	}
}

func TestDisconnectHalfUp(t *testing.T) {
	bin, _ := fakeCLI(t, "echo 'failed to remove rule' >&2; exit 2")
	err := New(Options{Bin: bin}).Disconnect(context.Background())
	if !errors.Is(err, ErrHalfUp) {
		t.Errorf("err = %v, want ErrHalfUp", err)
	}
	bin, _ = fakeCLI(t, "exit 0")
	if err := New(Options{Bin: bin}).Disconnect(context.Background()); err != nil {
		t.Error(err)
	}
}

func TestNodes(t *testing.T) {
	bin, _ := fakeCLI(t, "printf 'Dallas\\nLos Angeles\\n\\nChicago\\n'")
	nodes, err := New(Options{Bin: bin}).Nodes(context.Background())
	if err != nil || !slices.Equal(nodes, []string{"Dallas", "Los Angeles", "Chicago"}) {
		t.Errorf("Nodes = %q, %v", nodes, err)
	}
	bin, _ = fakeCLI(t, "echo boom; exit 1")
	if _, err := New(Options{Bin: bin}).Nodes(context.Background()); err == nil {
		t.Error("failing nodes accepted")
	}
}

// TestPatternsMatchWholeWords: a pattern is a word or phrase of the vendor's
// output, not any run of characters. CI once saw the rate-limit pattern
// "429" inside an ephemeral port of a network error ("127.0.0.1:42922"),
// which would have ended the login retries on a fault that retrying fixes.
func TestPatternsMatchWholeWords(t *testing.T) {
	pats := DefaultPatterns().FatalLogin
	for out, want := range map[string]string{
		`✘ Login failed — network error: Post "http://127.142.226.40:18080/v1/login": read tcp 127.0.0.1:42922->127.142.226.40:18080: read: connection reset by peer`: "",
		"dial tcp 10.4.29.1:4290: i/o timeout":              "",
		"✘ Login failed — Too Many Requests (429)":          "Too Many Requests",
		"✘ Login failed: HTTP 429":                          "429",
		"error 429: slow down":                              "429",
		"✘ invalid username/password.":                      "invalid username/password",
		"Device limit reached (5/5)":                        "Device limit",
		"DEVICE LIMIT":                                      "Device limit",
		"✘ Subscription expired, renew at surflare.example": "Subscription expired",
	} {
		got, _ := contains(out, pats)
		if got != want {
			t.Errorf("contains(%q) = %q, want %q", out, got, want)
		}
	}
	// A pattern's own punctuation needs no boundary, and words inside
	// other words do not match.
	for _, c := range []struct {
		out, pat string
		want     bool
	}{
		{"state: connected", "state: connected", true},
		{"state: disconnected", "connected", false},
		{"(not logged in)", "not logged in", true},
		{"x:429", ":429", true},
		{"x:4290", ":429", false},
		{"aé429", "429", false},
		{"", "429", false},
		{"429", "429", true},
		{"4429 429", "429", true},
	} {
		if got := containsWord(strings.ToLower(c.out), strings.ToLower(c.pat)); got != c.want {
			t.Errorf("containsWord(%q, %q) = %v, want %v", c.out, c.pat, got, c.want)
		}
	}
}
