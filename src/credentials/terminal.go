package credentials

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrInterrupted: the user interrupted a password prompt (Ctrl-C, a
// signal, or the context ended). The terminal is restored by then.
var ErrInterrupted = errors.New("interrupted")

// terminalSignals end a prompt: each of them would otherwise kill the
// process with echo still off and leave the user's shell without echo.
var terminalSignals = []os.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT}

// ReadPassword reads a password for `credentials set` and `setup-auth`.
//
// When in is a terminal, it writes a "Password: " prompt to prompt, turns
// echo off (termios, TCSETS) while the user types, and with confirm asks a
// second time and compares. The terminal's settings are restored when it
// returns — also when ctx ends or SIGINT, SIGTERM, SIGHUP or SIGQUIT
// arrives (then the error is ErrInterrupted).
//
// Otherwise (a pipe or file: `echo "$PW" | surflare-watchdog credentials
// set`) it reads one line from in without prompting; the line break is not
// part of the password.
//
// The password is checked with ValidatePassword.
func ReadPassword(ctx context.Context, in io.Reader, prompt io.Writer, confirm bool) (Secret, error) {
	if f, ok := in.(*os.File); ok {
		if old, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
			return readTerminal(ctx, f, old, prompt, confirm)
		}
	}
	line, err := readLineInterruptible(ctx, in, nil)
	if err != nil {
		return Secret{}, err
	}
	if err := ValidatePassword(line); err != nil {
		return Secret{}, err
	}
	return NewSecret(line), nil
}

// readTerminal prompts with echo off; see ReadPassword.
func readTerminal(ctx context.Context, f *os.File, old *unix.Termios, prompt io.Writer, confirm bool) (Secret, error) {
	fd := int(f.Fd())
	noEcho := *old
	noEcho.Lflag &^= unix.ECHO
	// Line editing and Ctrl-C keep working; Enter arrives as '\n'.
	noEcho.Lflag |= unix.ICANON | unix.ISIG
	noEcho.Iflag |= unix.ICRNL

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, terminalSignals...)
	defer signal.Stop(sigs)
	var once sync.Once
	restore := func() { once.Do(func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }) }
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &noEcho); err != nil {
		return Secret{}, fmt.Errorf("turning terminal echo off: %w", err)
	}
	defer restore()

	ask := func(p string) (string, error) {
		io.WriteString(prompt, p)
		line, err := readLineInterruptible(ctx, f, sigs)
		// The user's Enter was not echoed either.
		io.WriteString(prompt, "\n")
		return line, err
	}
	pw, err := ask("Password: ")
	if err != nil {
		return Secret{}, err
	}
	if err := ValidatePassword(pw); err != nil {
		return Secret{}, err
	}
	if confirm {
		again, err := ask("Repeat password: ")
		if err != nil {
			return Secret{}, err
		}
		if again != pw {
			return Secret{}, errors.New("the passwords do not match")
		}
	}
	return NewSecret(pw), nil
}

// readLineInterruptible reads one line in a goroutine so that the caller
// can give up on ctx or a signal; the reader is left blocked in that case
// (the process is about to exit, or the test closes the terminal).
func readLineInterruptible(ctx context.Context, r io.Reader, sigs <-chan os.Signal) (string, error) {
	type result struct {
		line string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := readLine(r)
		ch <- result{line, err}
	}()
	select {
	case res := <-ch:
		return res.line, res.err
	case <-ctx.Done():
		return "", fmt.Errorf("reading the password: %w", ErrInterrupted)
	case s := <-sigs:
		return "", fmt.Errorf("reading the password: %w by %v", ErrInterrupted, s)
	}
}

// readLine reads up to a newline, one byte at a time so that nothing after
// the line is consumed. It drops the newline and a CR before it.
func readLine(r io.Reader) (string, error) {
	// Room for the longest password and a CR, allocated once, so that no
	// copy of a partial password is left behind by a reallocation.
	buf := make([]byte, 0, maxPasswordLen+2)
	defer func() { clear(buf[:cap(buf)]) }()
	var b [1]byte
	for {
		n, err := r.Read(b[:])
		if n == 1 {
			if b[0] == '\n' {
				break
			}
			if len(buf) == cap(buf) {
				return "", fmt.Errorf("the password is longer than %d bytes", maxPasswordLen)
			}
			buf = append(buf, b[0])
			continue
		}
		if errors.Is(err, io.EOF) {
			if len(buf) == 0 {
				return "", errors.New("no password given (the input is empty)")
			}
			break
		}
		if err != nil {
			return "", fmt.Errorf("reading the password: %w", err)
		}
	}
	if n := len(buf); n > 0 && buf[n-1] == '\r' {
		buf = buf[:n-1]
	}
	return string(buf), nil
}
