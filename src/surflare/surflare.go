// Package surflare drives the proprietary Surflare vendor CLI (`surflare`):
// status, connect, disconnect, login and nodes.
//
// The CLI is a black box that may hang, print unexpected text or leave
// children behind, so every call here is bounded by a timeout and runs in its
// own process group, which is killed as a whole when the timeout expires. The
// child inherits no descriptor of ours beyond stdin/stdout/stderr: Go opens
// every file close-on-exec, and the instance lock (package runfiles) is opened
// with O_CLOEXEC explicitly. Every string the CLI prints that we interpret is
// a configurable pattern (Patterns), with SURFLARE-CONTRACT.md's strings as
// defaults, because the real binary can change its wording in an update.
package surflare

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"
)

// DefaultBin is where the vendor package installs its CLI.
const DefaultBin = "/usr/bin/surflare"

// Default timeouts; the shell original wrapped every call in `timeout 10`.
const (
	DefaultTimeout        = 10 * time.Second
	DefaultConnectTimeout = 30 * time.Second
	DefaultLoginTimeout   = 30 * time.Second
	// waitDelay bounds how long we wait for output pipes after the CLI
	// exits: `connect --daemon` may leave a detached proxy holding them.
	waitDelay = time.Second
	// maxOutput caps captured output; the CLI prints a few lines.
	maxOutput = 64 << 10
)

// ExitTimeout is the exit code reported for a call we killed on timeout,
// matching coreutils `timeout` as the shell original saw it.
const ExitTimeout = 124

// LoginMode selects how the password reaches the CLI.
type LoginMode string

const (
	// LoginPTY answers the CLI's "Password: " prompt on a pseudo-terminal,
	// so the password never appears in any process's argv.
	LoginPTY LoginMode = "pty"
	// LoginArgv passes `-p PASSWORD`: visible in /proc/PID/cmdline to every
	// local user for the duration of the call. A fallback only.
	LoginArgv LoginMode = "argv"
)

// Patterns are the case-insensitive substrings used to interpret CLI output.
type Patterns struct {
	Connected            []string // status: tunnel up
	Disconnected         []string // status: tunnel down (checked before Connected)
	AuthNeeded           []string // status/connect: a login is required
	SubscriptionInactive []string // status: account has no active plan; do not log in
	AccountCheckFailed   []string // connect/login: the account API was unreachable
	FatalLogin           []string // login: retrying cannot help (and may lock the account)
	PasswordPrompt       string   // login in pty mode: the prompt to answer
}

// DefaultPatterns returns SURFLARE-CONTRACT.md's strings.
func DefaultPatterns() Patterns {
	return Patterns{
		Connected:            []string{"state: connected"},
		Disconnected:         []string{"state: disconnected"},
		AuthNeeded:           []string{"not logged in", "session expired"},
		SubscriptionInactive: []string{"subscription not active"},
		AccountCheckFailed:   []string{"Account check failed"},
		FatalLogin: []string{"Too Many Requests", "429", "invalid username/password",
			"Subscription expired", "Device limit", "Account check failed"},
		PasswordPrompt: "Password:",
	}
}

// Options configure a Client. Zero fields take the defaults above.
type Options struct {
	Bin            string
	Timeout        time.Duration // status, disconnect, nodes
	ConnectTimeout time.Duration
	LoginTimeout   time.Duration
	Patterns       *Patterns // nil: DefaultPatterns()
	LoginMode      LoginMode // "" = LoginPTY
	Username       string
	// Password returns the account password when a login is needed; it is
	// read late so a changed credentials file needs no restart.
	Password func() (string, error)
	// Env, when non-nil, replaces the child's environment.
	Env []string
}

// Client runs the vendor CLI. Safe for concurrent use, though the watchdog
// serialises connect/disconnect itself.
type Client struct {
	opts Options
	pat  Patterns
}

// New returns a Client with defaults filled in.
func New(opts Options) *Client {
	if opts.Bin == "" {
		opts.Bin = DefaultBin
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.LoginTimeout <= 0 {
		opts.LoginTimeout = DefaultLoginTimeout
	}
	if opts.LoginMode == "" {
		opts.LoginMode = LoginPTY
	}
	pat := DefaultPatterns()
	if opts.Patterns != nil {
		pat = *opts.Patterns
	}
	return &Client{opts: opts, pat: pat}
}

// Errors callers branch on; each returned error wraps one of them and carries
// the CLI's output.
var (
	// ErrAuthNeeded: the CLI says the session is gone; call Login.
	ErrAuthNeeded = errors.New("surflare: login required")
	// ErrSubscriptionInactive: no active plan; logging in cannot help.
	ErrSubscriptionInactive = errors.New("surflare: subscription not active")
	// ErrAccountCheck: the account API was unreachable from the router.
	ErrAccountCheck = errors.New("surflare: account check failed")
	// ErrHalfUp: disconnect failed and may have left the vendor table,
	// fwmark rule(s) and table-100 route behind; clean them up.
	ErrHalfUp = errors.New("surflare: disconnect left the tunnel half up")
	// ErrTimeout: the call was killed after its timeout.
	ErrTimeout = errors.New("surflare: timed out")
)

// result is one finished CLI call.
type result struct {
	out      string // stdout and stderr interleaved
	code     int    // exit code; ExitTimeout when we killed it
	timedOut bool
}

// run executes the CLI with args in its own process group, bounded by
// timeout; the whole group is SIGKILLed when the timeout or ctx expires.
// A non-zero exit is not an error here; err is for "could not run at all"
// and for cancellation by the caller.
func (c *Client) run(ctx context.Context, timeout time.Duration, args ...string) (result, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, c.opts.Bin, args...)
	cmd.Env = c.opts.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = waitDelay
	var buf limitedBuffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	CloseInheritedOnExec() // E5: the proxy it forks keeps what it inherits
	err := cmd.Run()
	return c.finish(ctx, cctx, cmd, buf.String(), err)
}

// finish turns the outcome of Wait into a result.
func (c *Client) finish(ctx, cctx context.Context, cmd *exec.Cmd, out string, err error) (result, error) {
	r := result{out: out}
	if ctx.Err() != nil {
		return r, fmt.Errorf("surflare %s: %w", cmd.Args[1], ctx.Err())
	}
	if cctx.Err() != nil {
		r.code, r.timedOut = ExitTimeout, true
		return r, nil
	}
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		if cmd.ProcessState != nil {
			r.code = cmd.ProcessState.ExitCode()
		}
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if r.code < 0 { // killed by a signal we did not send
			r.code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
	default:
		return r, fmt.Errorf("running %s: %w", c.opts.Bin, err)
	}
	return r, nil
}

// killGroup SIGKILLs the child's whole process group (it is the leader).
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// limitedBuffer keeps the first maxOutput bytes; it is written by the two
// copying goroutines os/exec starts for stdout and stderr.
type limitedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := maxOutput - l.b.Len(); room > 0 {
		if len(p) > room {
			l.b.Write(p[:room])
		} else {
			l.b.Write(p)
		}
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// contains reports whether out contains any pattern, ignoring case, as a
// whole word: where a pattern begins or ends with a letter or digit, the
// text beside the match must not continue the word. The vendor's "429" must
// not match the ephemeral port in "read tcp 127.0.0.1:42922->…": that would
// call a retryable network error a fatal login failure and stop the retries.
func contains(out string, patterns []string) (string, bool) {
	lo := strings.ToLower(out)
	for _, p := range patterns {
		if p != "" && containsWord(lo, strings.ToLower(p)) {
			return p, true
		}
	}
	return "", false
}

// containsWord finds p in s at a word boundary (see contains).
func containsWord(s, p string) bool {
	for from := 0; from <= len(s)-len(p); {
		i := strings.Index(s[from:], p)
		if i < 0 {
			return false
		}
		i += from
		end := i + len(p)
		before, _ := utf8.DecodeLastRuneInString(s[:i])
		after, _ := utf8.DecodeRuneInString(s[end:])
		first, _ := utf8.DecodeRuneInString(p)
		last, _ := utf8.DecodeLastRuneInString(p)
		if !(wordRune(first) && i > 0 && wordRune(before)) &&
			!(wordRune(last) && end < len(s) && wordRune(after)) {
			return true
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		from = i + size
	}
	return false
}

func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

// brief shortens CLI output for an error message: last non-empty line.
func brief(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if len(last) > 200 {
		last = last[:200] + "…"
	}
	if last == "" {
		return "no output"
	}
	return last
}

// Connect runs `surflare connect --node NODE [--mode MODE] [--transit
// TRANSIT] --daemon`. Node tags may contain spaces ("Los Angeles"); they are
// passed as one argument. It returns once the CLI reports the proxy launched;
// whether the tunnel works is for the caller's health checks to prove.
func (c *Client) Connect(ctx context.Context, node, mode, transit string) error {
	if node == "" {
		return errors.New("surflare connect: no node given")
	}
	args := []string{"connect", "--node", node}
	if mode != "" {
		args = append(args, "--mode", mode)
	}
	if transit != "" {
		args = append(args, "--transit", transit)
	}
	args = append(args, "--daemon")
	r, err := c.run(ctx, c.opts.ConnectTimeout, args...)
	if err != nil {
		return err
	}
	return c.classifyCommand("connect to "+node, r)
}

// classifyCommand maps a failed connect/disconnect-style call to an error.
func (c *Client) classifyCommand(what string, r result) error {
	if r.timedOut {
		return fmt.Errorf("surflare %s: %w after %s", what, ErrTimeout, c.opts.ConnectTimeout)
	}
	if r.code == 0 {
		return nil
	}
	if _, ok := contains(r.out, c.pat.SubscriptionInactive); ok {
		return fmt.Errorf("surflare %s: %w: %s", what, ErrSubscriptionInactive, brief(r.out))
	}
	if _, ok := contains(r.out, c.pat.AccountCheckFailed); ok {
		return fmt.Errorf("surflare %s: %w: %s", what, ErrAccountCheck, brief(r.out))
	}
	if _, ok := contains(r.out, c.pat.AuthNeeded); ok {
		return fmt.Errorf("surflare %s: %w: %s", what, ErrAuthNeeded, brief(r.out))
	}
	return fmt.Errorf("surflare %s: exit %d: %s", what, r.code, brief(r.out))
}

// Disconnect runs `surflare disconnect`. A non-zero exit wraps ErrHalfUp:
// the CLI is known to leave its table, rule(s) and route behind, and the
// caller must flush them before the next connect.
func (c *Client) Disconnect(ctx context.Context) error {
	r, err := c.run(ctx, c.opts.Timeout, "disconnect")
	if err != nil {
		return err
	}
	if r.code == 0 {
		return nil
	}
	if r.timedOut {
		return fmt.Errorf("surflare disconnect: %w (%w)", ErrHalfUp, ErrTimeout)
	}
	return fmt.Errorf("surflare disconnect: %w: exit %d: %s", ErrHalfUp, r.code, brief(r.out))
}

// Nodes runs `surflare nodes`: one node tag per line.
func (c *Client) Nodes(ctx context.Context) ([]string, error) {
	r, err := c.run(ctx, c.opts.Timeout, "nodes")
	if err != nil {
		return nil, err
	}
	if r.timedOut {
		return nil, fmt.Errorf("surflare nodes: %w", ErrTimeout)
	}
	if r.code != 0 {
		return nil, fmt.Errorf("surflare nodes: exit %d: %s", r.code, brief(r.out))
	}
	var nodes []string
	for _, l := range strings.Split(r.out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			nodes = append(nodes, l)
		}
	}
	return nodes, nil
}
