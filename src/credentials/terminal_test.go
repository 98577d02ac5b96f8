package credentials

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// terminal is a pseudo-terminal: the test types on the master side, the
// code under test reads the tty side, and everything the tty side shows
// (prompts, echo) is collected.
type terminal struct {
	master, tty *os.File
	mu          sync.Mutex
	screen      strings.Builder
	changed     chan struct{}
}

func newTerminal(t *testing.T) *terminal {
	t.Helper()
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal available: %v", err)
	}
	term := &terminal{master: master, tty: tty, changed: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 256)
		for {
			n, err := master.Read(buf)
			term.mu.Lock()
			term.screen.Write(buf[:n])
			term.mu.Unlock()
			select {
			case term.changed <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		// A reader the code under test abandoned (cancel, signal) still
		// blocks in read(2) and keeps the tty open: give it a line.
		io.WriteString(master, "\r")
		tty.Close()
		master.Close()
		<-done
	})
	return term
}

func (term *terminal) text() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.screen.String()
}

// waitFor waits until the screen shows s (n times in total).
func (term *terminal) waitFor(t *testing.T, s string, n int) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for strings.Count(term.text(), s) < n {
		select {
		case <-term.changed:
		case <-deadline:
			t.Fatalf("terminal never showed %q; screen: %q", s, term.text())
		}
	}
}

func (term *terminal) typeLine(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(term.master, s+"\r"); err != nil {
		t.Fatal(err)
	}
}

func (term *terminal) echoOn(t *testing.T) bool {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(term.tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return tio.Lflag&unix.ECHO != 0
}

type readResult struct {
	pw  Secret
	err error
}

func (term *terminal) read(ctx context.Context, confirm bool) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		pw, err := ReadPassword(ctx, term.tty, term.tty, confirm)
		ch <- readResult{pw, err}
	}()
	return ch
}

func TestReadPasswordOnATerminalDoesNotEcho(t *testing.T) {
	term := newTerminal(t)
	if !term.echoOn(t) {
		t.Fatal("a fresh pty should echo")
	}
	res := term.read(context.Background(), true)
	term.waitFor(t, "Password: ", 1)
	if term.echoOn(t) {
		t.Error("echo is on while the password is typed")
	}
	term.typeLine(t, planted)
	term.waitFor(t, "Repeat password: ", 1)
	term.typeLine(t, planted)
	r := <-res
	if r.err != nil || r.pw.Reveal() != planted {
		t.Fatalf("ReadPassword: %v (password ok: %v)", r.err, r.pw.Reveal() == planted)
	}
	if !term.echoOn(t) {
		t.Error("echo not restored after the prompt")
	}
	// Give the pty a moment to deliver any (wrongly) echoed bytes: type a
	// marker with echo back on and wait for it.
	io.WriteString(term.master, "marker\r")
	term.waitFor(t, "marker", 1)
	assertNoLeak(t, "terminal screen", term.text())
}

func TestReadPasswordMismatchIsAnError(t *testing.T) {
	term := newTerminal(t)
	res := term.read(context.Background(), true)
	term.waitFor(t, "Password: ", 1)
	term.typeLine(t, "one")
	term.waitFor(t, "Repeat password: ", 1)
	term.typeLine(t, "two")
	if r := <-res; r.err == nil || !strings.Contains(r.err.Error(), "do not match") {
		t.Fatalf("mismatch: %v", r.err)
	}
	if !term.echoOn(t) {
		t.Error("echo not restored after a mismatch")
	}
}

func TestReadPasswordRestoresTheTerminalWhenCancelled(t *testing.T) {
	term := newTerminal(t)
	ctx, cancel := context.WithCancel(context.Background())
	res := term.read(ctx, false)
	term.waitFor(t, "Password: ", 1)
	cancel()
	if r := <-res; !errors.Is(r.err, ErrInterrupted) {
		t.Fatalf("cancelled prompt: %v, want ErrInterrupted", r.err)
	}
	if !term.echoOn(t) {
		t.Error("echo left off after cancel")
	}
}

// A real signal (SIGHUP: the terminal went away) while the prompt waits:
// the terminal gets its echo back before the process would die.
func TestReadPasswordRestoresTheTerminalOnSignal(t *testing.T) {
	term := newTerminal(t)
	res := term.read(context.Background(), false)
	term.waitFor(t, "Password: ", 1) // the handler is installed before the prompt
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if !errors.Is(r.err, ErrInterrupted) || !strings.Contains(r.err.Error(), "hangup") {
		t.Fatalf("signalled prompt: %v, want ErrInterrupted by hangup", r.err)
	}
	if !term.echoOn(t) {
		t.Error("echo left off after SIGHUP")
	}
}

func TestReadPasswordFromAPipeReadsOneLine(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	io.WriteString(w, "piped pw\r\nnext line\n")
	w.Close()
	pw, err := ReadPassword(context.Background(), r, io.Discard, true)
	if err != nil || pw.Reveal() != "piped pw" {
		t.Fatalf("ReadPassword from a pipe: %q, %v", pw.Reveal(), err)
	}
	rest, _ := io.ReadAll(r)
	if string(rest) != "next line\n" {
		t.Errorf("the reader consumed past the line: rest %q", rest)
	}

	for _, in := range []string{"", "\n", strings.Repeat("x", maxPasswordLen+10) + "\n"} {
		if _, err := ReadPassword(context.Background(), strings.NewReader(in), io.Discard, false); err == nil {
			t.Errorf("ReadPassword accepted %.20q...", in)
		}
	}
	if pw, err := ReadPassword(context.Background(), strings.NewReader("no-newline"), io.Discard, false); err != nil || pw.Reveal() != "no-newline" {
		t.Errorf("a last line without newline: %q, %v", pw.Reveal(), err)
	}
}
