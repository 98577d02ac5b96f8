package surflare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
)

// LoginError is a failed login. Fatal errors must not be retried: the
// contract's fatal messages (rate limiting, bad credentials, expired plan,
// device limit, account check) only get worse with repetition — a retry loop
// against `429` can get the account locked.
type LoginError struct {
	Fatal  bool
	Reason string // the matched pattern, "timed out", or the CLI's last line
	Code   int    // exit code; ExitTimeout when killed
}

// Error says whether the failure is fatal and why, never with the password.
func (e *LoginError) Error() string {
	class := "retryable"
	if e.Fatal {
		class = "fatal"
	}
	return fmt.Sprintf("surflare login failed (%s): %s", class, e.Reason)
}

// IsFatal reports whether err is a LoginError that must not be retried.
func IsFatal(err error) bool {
	var le *LoginError
	return errors.As(err, &le) && le.Fatal
}

// ErrNoCredentials: login is needed but no username/password is configured.
// Fatal in effect; LoginError with Fatal set wraps it.
var ErrNoCredentials = errors.New("no Surflare username or password configured")

// Login runs `surflare login -u EMAIL --remember`. In pty mode (default) the
// password is typed at the CLI's "Password: " prompt on a pseudo-terminal;
// in argv mode it is passed with -p. The password never appears in the
// returned error, even when the terminal echoes it.
func (c *Client) Login(ctx context.Context) error {
	if c.opts.Username == "" || c.opts.Password == nil {
		return &LoginError{Fatal: true, Reason: ErrNoCredentials.Error()}
	}
	pass, err := c.opts.Password()
	switch {
	case err != nil:
		// The source says what is wrong and how to fix it (missing file,
		// unsafe mode, unreadable): pass that on as it is.
		return &LoginError{Fatal: true, Reason: fmt.Sprintf("reading password: %v", err)}
	case pass == "":
		return &LoginError{Fatal: true, Reason: "reading password: " + ErrNoCredentials.Error()}
	}
	var r result
	if c.opts.LoginMode == LoginArgv {
		r, err = c.run(ctx, c.opts.LoginTimeout, "login", "-u", c.opts.Username, "-p", pass, "--remember")
		if err == nil && noArgvForm(r) {
			// E10: a client with the prompt only. The terminal form is
			// the safer one anyway: use it.
			r, err = c.loginPTY(ctx, pass)
		}
	} else {
		r, err = c.loginPTY(ctx, pass)
	}
	if err != nil {
		return err
	}
	r.out = strings.ReplaceAll(r.out, pass, "********")
	if c.opts.LoginMode != LoginArgv && noPromptForm(r) {
		return &LoginError{Fatal: true, Code: r.code, Reason: "this Surflare client takes the password only on its command line (" + brief(r.out) +
			"): set auth.login_mode to 'argv' (local programs can then see the password while a login runs)"}
	}
	return c.classifyLogin(r)
}

func (c *Client) classifyLogin(r result) error {
	if r.timedOut {
		return &LoginError{Reason: "timed out after " + c.opts.LoginTimeout.String(), Code: r.code}
	}
	if r.code == 0 {
		return nil
	}
	if p, ok := contains(r.out, c.pat.FatalLogin); ok {
		return &LoginError{Fatal: true, Reason: p + ": " + brief(r.out), Code: r.code}
	}
	return &LoginError{Reason: brief(r.out), Code: r.code}
}

// loginPTY runs the CLI on a new pseudo-terminal (its own session, so its
// process group is killed as a whole on timeout), waits for the prompt and
// types the password.
func (c *Client) loginPTY(ctx context.Context, pass string) (result, error) {
	cctx, cancel := context.WithTimeout(ctx, c.opts.LoginTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, c.opts.Bin, "login", "-u", c.opts.Username, "--remember")
	cmd.Env = c.opts.Env
	cmd.Cancel = func() error { return killGroup(cmd) }
	// Setsid makes the child a session and process-group leader; Setctty
	// makes the pty its /dev/tty, where a password prompt is read from.
	CloseInheritedOnExec() // E5, as in run
	master, err := pty.StartWithAttrs(cmd, nil, &syscall.SysProcAttr{Setsid: true, Setctty: true})
	if err != nil {
		return result{}, fmt.Errorf("starting %s login on a pty: %w", c.opts.Bin, err)
	}
	defer master.Close()

	var buf limitedBuffer
	prompt := make(chan struct{})
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		watch := &promptWatcher{prompt: strings.ToLower(c.pat.PasswordPrompt), seen: prompt}
		// Ends with EIO once every holder of the pty's slave side is gone,
		// or when master is closed below.
		io.Copy(io.MultiWriter(&buf, watch), master)
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	var werr error
	select {
	case <-prompt:
		if _, err := io.WriteString(master, pass+"\n"); err != nil && !errors.Is(err, os.ErrClosed) {
			killGroup(cmd)
		}
		werr = <-waited
	case werr = <-waited:
	}
	// Drain what the CLI printed last, but never wait on a straggler that
	// keeps the terminal open.
	t := time.NewTimer(waitDelay)
	defer t.Stop()
	select {
	case <-readDone:
	case <-t.C:
	}
	master.Close()
	<-readDone
	return c.finish(ctx, cctx, cmd, buf.String(), werr)
}

// promptWatcher closes seen the first time the prompt appears in the stream.
type promptWatcher struct {
	prompt string
	seen   chan struct{}
	once   sync.Once
	tail   string
}

func (p *promptWatcher) Write(b []byte) (int, error) {
	p.tail += strings.ToLower(string(b))
	if strings.Contains(p.tail, p.prompt) {
		p.once.Do(func() { close(p.seen) })
	}
	if len(p.tail) > 256 {
		p.tail = p.tail[len(p.tail)-256:]
	}
	return len(b), nil
}
