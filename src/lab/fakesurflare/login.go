package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"surflare-watchdog/src/lab/fakes"
)

func cmdLogin(e *env, args []string) int {
	// The login knob (E10) decides which forms exist: -p on the command
	// line, the terminal prompt, or both.
	form := e.info.Vendor.Login
	synopsis := "-u EMAIL [-p PASSWORD] [--remember]"
	switch form {
	case fakes.LoginArgv:
		synopsis = "-u EMAIL -p PASSWORD [--remember]"
	case fakes.LoginPTY:
		synopsis = "-u EMAIL [--remember]"
	}
	fs := e.flags("login", synopsis)
	email := fs.String("u", "", "account email")
	var password *string
	if form != fakes.LoginPTY {
		password = fs.String("p", "", "password (prompted on the terminal when absent)")
	}
	remember := fs.Bool("remember", false, "keep the session")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *email == "" {
		fmt.Fprintln(e.stderr, "✘ -u EMAIL is required")
		fs.Usage()
		return exitUsage
	}
	pwGiven := false
	fs.Visit(func(f *flag.Flag) { pwGiven = pwGiven || f.Name == "p" })
	if !pwGiven && form == fakes.LoginArgv {
		fmt.Fprintln(e.stderr, "✘ -p PASSWORD is required")
		fs.Usage()
		return exitUsage
	}
	if e.faults.LoginHang {
		hangForever()
	}
	var pw string
	if pwGiven {
		pw = *password
	} else {
		var err error
		if pw, err = promptPassword(); err != nil {
			return e.fail("Login failed — %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*apiTimeout)
	defer cancel()
	tok, err := e.apiLogin(ctx, *email, pw)
	if err != nil {
		// Network errors read "network error: …" (retryable); API refusals
		// carry the API's message, e.g. "Too Many Requests (HTTP 429)".
		return e.fail("Login failed — %v", err)
	}
	st, err := fakes.LoadState(e.info)
	if err != nil {
		return e.fail("%v", err)
	}
	st.LoggedIn, st.Email, st.Token, st.LoginAt, st.Remember = true, *email, tok, e.now().UTC(), *remember
	if err := fakes.SaveState(e.info, st); err != nil {
		return e.fail("%v", err)
	}
	fmt.Fprintf(e.stdout, "✔ Logged in as %s\n", *email)
	return exitOK
}

// hangForever models the client's login hanging before it prompts: only a
// signal ends it.
func hangForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// promptPassword writes "Password: " to the controlling terminal and reads
// one line from it with echo off, as the real client does; an expect-like
// driver on a pty answers it.
func promptPassword() (string, error) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("cannot prompt for the password, no terminal (use -p): %w", err)
	}
	defer tty.Close()
	fd := int(tty.Fd())
	if old, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
		noEcho := *old
		noEcho.Lflag &^= unix.ECHO
		noEcho.Lflag |= unix.ICANON | unix.ECHONL
		unix.IoctlSetTermios(fd, unix.TCSETS, &noEcho)
		defer unix.IoctlSetTermios(fd, unix.TCSETS, old)
	}
	if _, err := tty.WriteString("Password: "); err != nil {
		return "", fmt.Errorf("writing prompt: %w", err)
	}
	var line []byte
	buf := make([]byte, 1)
	for {
		n, err := tty.Read(buf)
		if n == 1 {
			if buf[0] == '\n' {
				break
			}
			line = append(line, buf[0])
			continue
		}
		if err != nil {
			return "", fmt.Errorf("reading password: %w", err)
		}
	}
	return strings.TrimSuffix(string(line), "\r"), nil
}
