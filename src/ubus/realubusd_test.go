package ubus

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"surflare-watchdog/src/testenv"
)

// The real-ubusd tests run our object server, Service and client against
// the real ubusd and the real ubus CLI from github.com/openwrt/ubus. Debian
// does not package them: UBUSD and UBUS_CLI name binaries built by hand (or
// ubusd and ubus are on PATH; README.md says how to build them), and
// without those the OpenWrt userland beside the repository provides them,
// run through chroot. They skip when neither is there. They need root:
// ubusd lets only root (or users its ACL files name) register objects.

// ubusdDefaultSockDir is the directory of ubusd's compiled-in socket: it
// creates it even when told to listen elsewhere with -s.
const ubusdDefaultSockDir = "/var/run/ubus"

// realUbus is one real ubusd on a private socket, and the real CLI.
type realUbus struct {
	t      *testing.T
	ubusd  string
	cli    string
	root   string // the OpenWrt root the programs run in (chroot), or ""
	sock   string // the socket, as our code reaches it
	aclDir string
	// sockArg and aclArg are sock and aclDir as the real programs see
	// them (inside root).
	sockArg, aclArg string
	mu              sync.Mutex
	proc            *exec.Cmd
	procDone        chan struct{}
}

// needRealUbus finds the real binaries (or skips) and starts ubusd.
func needRealUbus(t *testing.T) *realUbus {
	t.Helper()
	find := func(env, name string) string {
		if p := os.Getenv(env); p != "" {
			return p
		}
		p, _ := exec.LookPath(name)
		return p
	}
	r := &realUbus{t: t, ubusd: find("UBUSD", "ubusd"), cli: find("UBUS_CLI", "ubus")}
	if os.Geteuid() != 0 {
		t.Skip("needs root: ubusd ACLs allow object registration by root only")
	}
	var dir string
	if r.ubusd == "" || r.cli == "" {
		if testenv.OpenWrtDir() == "" {
			t.Skip("no real ubusd and ubus CLI: set UBUSD and UBUS_CLI (see src/ubus/README.md), or put the OpenWrt userland at ../shared/owrt beside the repository")
		}
		r.root, r.ubusd, r.cli = testenv.OpenWrtRoot(t), "/sbin/ubusd", "ubus"
		var err error
		if dir, err = os.MkdirTemp(filepath.Join(r.root, "tmp"), "surfubus"); err != nil {
			t.Fatal(err)
		}
	} else {
		dir = t.TempDir()
		if _, err := os.Stat(ubusdDefaultSockDir); errors.Is(err, fs.ErrNotExist) {
			t.Cleanup(func() { os.Remove(ubusdDefaultSockDir) }) // only if still empty
		}
	}
	r.sock = filepath.Join(dir, "ubus.sock")
	// An empty ACL directory: ubusd must not read the host's
	// /usr/share/acl.d; root is allowed everything without files anyway.
	r.aclDir = filepath.Join(dir, "acl.d")
	if err := os.Mkdir(r.aclDir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.sockArg, r.aclArg = r.inside(r.sock), r.inside(r.aclDir)
	t.Cleanup(r.stop)
	r.start()
	return r
}

// inside is a host path as the real programs see it: below root when
// they run in the OpenWrt root.
func (r *realUbus) inside(path string) string {
	if r.root == "" {
		return path
	}
	return "/" + strings.TrimPrefix(strings.TrimPrefix(path, r.root), "/")
}

// command runs a real program, in the OpenWrt root when there is one.
// argv[0] stays the bare name, as a user types it (usage texts print it).
func (r *realUbus) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if r.root == "" {
		cmd := exec.CommandContext(ctx, name)
		cmd.Args = append([]string{filepath.Base(name)}, args...)
		return cmd
	}
	cmd := exec.CommandContext(ctx, "chroot", append([]string{r.root, name}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	return cmd
}

// start runs ubusd and returns once its socket accepts connections.
func (r *realUbus) start() {
	r.t.Helper()
	cmd := r.command(context.Background(), r.ubusd, "-A", r.aclArg, "-s", r.sockArg)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("starting %s: %v", r.ubusd, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	r.mu.Lock()
	r.proc, r.procDone = cmd, done
	r.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if nc, err := net.Dial("unix", r.sock); err == nil {
			nc.Close()
			return
		}
		select {
		case <-done:
			r.t.Fatalf("%s exited at start: %v", r.ubusd, cmd.ProcessState)
		case <-time.After(10 * time.Millisecond): // a real process starting: polling is the only way
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s never listened on %s", r.ubusd, r.sock)
		}
	}
}

// stop kills ubusd (as a crash would: no goodbye to its clients).
func (r *realUbus) stop() {
	r.mu.Lock()
	cmd, done := r.proc, r.procDone
	r.proc = nil
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-done
}

// cliCmd builds a CLI command as a user types it: argv[0] is plain "ubus"
// (the usage text starts with it, as in the fixtures), -s our socket.
func (r *realUbus) cliCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := r.command(ctx, r.cli, append([]string{"-s", r.sockArg}, args...)...)
	if r.root == "" {
		cmd.Args[0] = "ubus"
	}
	cmd.WaitDelay = time.Second
	return cmd
}

// run runs the CLI to its end and returns what it printed (stdout and
// stderr in one stream, like the fixtures' *.cli.txt) and its exit status.
func (r *realUbus) run(args ...string) (string, int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := r.cliCmd(ctx, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		r.t.Fatalf("ubus %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// runSplit runs the CLI and returns stdout and stderr apart: the CLI's
// stdout is block-buffered on a pipe, so in one stream a reply printed
// before "Command failed" would come after it.
func (r *realUbus) runSplit(args ...string) (stdout, stderr string, code int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := r.cliCmd(ctx, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		r.t.Fatalf("ubus %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// transcript is a CLI run in the fixtures' *.cli.txt form, without the
// leading `$ command` line.
func (r *realUbus) transcript(args ...string) string {
	r.t.Helper()
	out, code := r.run(args...)
	return out + exitLine("", code)
}

func exitLine(what string, code int) string {
	if what != "" {
		what += " "
	}
	return "[" + what + "exit " + strconv.Itoa(code) + "]\n"
}

// bgCLI is a CLI command left running (listen, subscribe, wait_for).
type bgCLI struct {
	cmd   *exec.Cmd
	lines chan string // stdout, line by line
	mu    sync.Mutex
	all   strings.Builder
	done  chan struct{}
}

// background starts the CLI and hands its output over line by line.
func (r *realUbus) background(args ...string) *bgCLI {
	r.t.Helper()
	cmd := r.cliCmd(context.Background(), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		r.t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	b := &bgCLI{cmd: cmd, lines: make(chan string, 256), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("ubus %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		defer close(b.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			b.mu.Lock()
			b.all.WriteString(sc.Text() + "\n")
			b.mu.Unlock()
			select {
			case b.lines <- sc.Text():
			default:
			}
		}
		cmd.Wait()
	}()
	r.t.Cleanup(func() { cmd.Process.Signal(syscall.SIGKILL); <-b.done })
	return b
}

// wait waits for the command's end and returns all it printed and its
// exit status.
func (b *bgCLI) wait(t *testing.T) (string, int) {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("%v still running", b.cmd.Args)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.all.String(), b.cmd.ProcessState.ExitCode()
}

// goldenCLI reads a fixture transcript without its `$ command` lines and
// with a bare `[exit N]` for the command under test.
func goldenCLI(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir(t), name+".cli.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if !strings.HasPrefix(l, "$ ") {
			out.WriteString(l)
		}
	}
	return out.String()
}

// waitFor polls cond (state held by a real process, or a connection's
// view of it) until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // real processes: nothing to wait on but their output
	}
}

// runService runs svc until the test ends and reports each connection.
func runService(t *testing.T, svc *Service) <-chan *Conn {
	t.Helper()
	connected := make(chan *Conn, 8)
	svc.OnConnect = func(_ context.Context, c *Conn) error { connected <- c; return nil }
	if svc.MinBackoff == 0 {
		svc.MinBackoff = 20 * time.Millisecond
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { svc.Run(ctx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	return connected
}
