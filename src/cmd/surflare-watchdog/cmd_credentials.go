package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/credentials"
)

// The credentials and setup-auth subcommands put the account password where
// the daemon reads it (package credentials) without it ever being an
// argument, an environment variable or output: it is typed at a prompt with
// echo off, or piped on stdin.
func init() {
	register(&command{
		name:    "credentials",
		summary: "set, check or clear the account password (never shown)",
		run: func(ctx context.Context, args []string) int {
			return credentialsMain(ctx, args, osCredIO())
		},
	})
	register(&command{
		name:    "setup-auth",
		summary: "encrypt the password for systemd (TPM2 or host key), laptops",
		run: func(ctx context.Context, args []string) int {
			return setupAuth(ctx, args, osCredIO())
		},
	})
}

// credIO is what the credential commands talk to; tests replace all of it.
type credIO struct {
	stdin          io.Reader // a terminal gets a no-echo prompt
	stdout, stderr io.Writer
	// encrypt holds setup-auth's injectable parts (runner, binary lookup,
	// TPM sysfs path); flags fill in the rest.
	encrypt credentials.EncryptOptions
}

func osCredIO() credIO { return credIO{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr} }

const credentialsUsage = `Usage: surflare-watchdog credentials set|status|clear [flags]

  set     store the account password in /etc/surflare/credentials (0600):
          typed at a prompt without echo, or one line on stdin
          (printf '%%s\n' "$PW" | surflare-watchdog credentials set);
          --username EMAIL also sets UCI surflare.main.username
  status  say whether a password is stored and where it comes from, never
          what it is; exit 0 when a login can happen, 1 when not
  clear   remove /etc/surflare/credentials

The password is read from $CREDENTIALS_DIRECTORY/surflare-password first
(systemd, see setup-auth), then from /etc/surflare/credentials.
Run 'surflare-watchdog credentials set --help' for the flags.
`

func credentialsMain(ctx context.Context, args []string, cio credIO) int {
	return subcommands("credentials", credentialsUsage, args, cio.stdout, cio.stderr, map[string]func([]string) int{
		"set":    func(a []string) int { return credentialsSet(ctx, a, cio) },
		"status": func(a []string) int { return credentialsStatus(a, cio) },
		"clear":  func(a []string) int { return credentialsClear(ctx, a, cio) },
	})
}

// credFlags are the flags every credential command shares.
type credFlags struct {
	file, config, username *string
}

func addCredFlags(fs *flag.FlagSet, withUsername bool) credFlags {
	f := credFlags{
		file:   fs.String("file", credentials.DefaultFile, "the password `file`"),
		config: fs.String("config", config.DefaultPath, "the UCI `file` holding main.username"),
	}
	if withUsername {
		f.username = fs.String("username", "", "also set UCI main.username to this `EMAIL`")
	}
	return f
}

// parseCredFlags parses flags, refusing positional arguments: a password
// given as an argument would be in /proc/PID/cmdline and shell history.
func parseCredFlags(fs *flag.FlagSet, args []string, synopsis string, cio credIO) (int, bool) {
	if code, ok := parseFlagsOrUsage(fs, args, synopsis, cio.stdout, cio.stderr); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(cio.stderr, "surflare-watchdog %s: unexpected argument (the password is never an argument: type it at the prompt or pipe it on stdin)\n", fs.Name())
		return exitUsage, false
	}
	return 0, true
}

// options builds the credential options, reading the username from UCI.
func (f credFlags) options(cio credIO) credentials.Options {
	user, err := credentials.ReadUsername(*f.config)
	if err != nil {
		fmt.Fprintf(cio.stderr, "warning: %v\n", err)
	}
	return credentials.Options{Username: user, File: *f.file, ConfigFile: *f.config}
}

// exitForError maps an interrupted prompt to 130, anything else to 1.
func exitForError(ctx context.Context, err error, cio credIO) int {
	fmt.Fprintf(cio.stderr, "surflare-watchdog: %v\n", err)
	if ctx.Err() != nil || errors.Is(err, credentials.ErrInterrupted) {
		return exitInterrupted
	}
	return exitFailure
}

func credentialsSet(ctx context.Context, args []string, cio credIO) int {
	fs := flag.NewFlagSet("credentials set", flag.ContinueOnError)
	f := addCredFlags(fs, true)
	if code, ok := parseCredFlags(fs, args, "credentials set [--username EMAIL] [--file FILE] [--config FILE]", cio); !ok {
		return code
	}
	if *f.username != "" {
		if err := credentials.ValidateUsername(*f.username); err != nil {
			fmt.Fprintf(cio.stderr, "surflare-watchdog: %v\n", err)
			return exitUsage
		}
	}
	pw, err := credentials.ReadPassword(ctx, cio.stdin, cio.stderr, true)
	if err != nil {
		return exitForError(ctx, err, cio)
	}
	opts := f.options(cio)
	if err := credentials.Store(ctx, opts, *f.username, pw.Reveal()); err != nil {
		return exitForError(ctx, err, cio)
	}
	fmt.Fprintf(cio.stdout, "Password saved to %s (mode 0600).\n", *f.file)
	user := opts.Username
	if *f.username != "" {
		user = *f.username
		fmt.Fprintf(cio.stdout, "Username set to %s in %s.\n", user, *f.config)
	}
	if user == "" {
		fmt.Fprintf(cio.stderr, "warning: no username in %s; add one with --username EMAIL\n", *f.config)
	}
	if st := credentials.Status(credentials.Options{Username: user, File: *f.file}); st.Source != credentials.SourceFile {
		fmt.Fprintf(cio.stderr, "note: the daemon uses %s first (%s)\n", st.Path, st.Source)
	}
	return exitOK
}

func credentialsStatus(args []string, cio credIO) int {
	fs := flag.NewFlagSet("credentials status", flag.ContinueOnError)
	f := addCredFlags(fs, false)
	asJSON := fs.Bool("json", false, "print JSON")
	encrypted := fs.String("encrypted", credentials.DefaultEncryptedFile, "the systemd-creds `file` written by setup-auth")
	if code, ok := parseCredFlags(fs, args, "credentials status [--json] [--file FILE] [--config FILE]", cio); !ok {
		return code
	}
	st := credentials.Report(f.options(cio), *encrypted)
	code := exitFailure
	if st.Usable() {
		code = exitOK
	}
	if *asJSON {
		b, _ := json.MarshalIndent(st, "", "  ")
		fmt.Fprintf(cio.stdout, "%s\n", b)
		return code
	}
	st.WriteText(cio.stdout)
	return code
}

func credentialsClear(ctx context.Context, args []string, cio credIO) int {
	fs := flag.NewFlagSet("credentials clear", flag.ContinueOnError)
	f := addCredFlags(fs, false)
	encrypted := fs.String("encrypted", credentials.DefaultEncryptedFile, "the systemd-creds `file` written by setup-auth (not removed)")
	if code, ok := parseCredFlags(fs, args, "credentials clear [--file FILE]", cio); !ok {
		return code
	}
	removed, err := credentials.Clear(ctx, credentials.Options{File: *f.file})
	if err != nil {
		return exitForError(ctx, err, cio)
	}
	if removed {
		fmt.Fprintf(cio.stdout, "Removed %s.\n", *f.file)
	} else {
		fmt.Fprintf(cio.stdout, "No password file at %s.\n", *f.file)
	}
	if _, err := os.Stat(*encrypted); err == nil {
		fmt.Fprintf(cio.stdout, "%s (setup-auth) is still there: delete it and the unit's LoadCredentialEncrypted= line to remove that one too.\n", *encrypted)
	}
	return exitOK
}

func setupAuth(ctx context.Context, args []string, cio credIO) int {
	fs := flag.NewFlagSet("setup-auth", flag.ContinueOnError)
	username := fs.String("username", "", "also set UCI main.username to this `EMAIL`")
	cfgPath := fs.String("config", config.DefaultPath, "the UCI `file` holding main.username")
	output := fs.String("output", credentials.DefaultEncryptedFile, "the encrypted credential `file` to write")
	key := fs.String("with-key", string(credentials.KeyAuto), "what to bind the credential to: auto (TPM2 if present, else host), tpm2 or host")
	dropin := fs.String("dropin", credentials.DefaultDropInDir, "the systemd drop-in `dir` that makes the unit load the credential (\"\" = only print the line)")
	if code, ok := parseCredFlags(fs, args, "setup-auth [--username EMAIL] [--with-key auto|tpm2|host] [--output FILE] [--dropin DIR]", cio); !ok {
		return code
	}
	k, err := credentials.ParseKey(*key)
	if err == nil && *username != "" {
		err = credentials.ValidateUsername(*username)
	}
	if err != nil {
		fmt.Fprintf(cio.stderr, "surflare-watchdog setup-auth: %v\n", err)
		return exitUsage
	}
	eo := cio.encrypt
	eo.Output, eo.Key = *output, k
	// Say so before asking for the password when it cannot work.
	if _, err := eo.FindSystemdCreds(); err != nil {
		fmt.Fprintf(cio.stderr, "surflare-watchdog setup-auth: %v\n", err)
		return exitFailure
	}
	pw, err := credentials.ReadPassword(ctx, cio.stdin, cio.stderr, true)
	if err != nil {
		return exitForError(ctx, err, cio)
	}
	res, err := credentials.EncryptForSystemd(ctx, eo, pw)
	if err != nil {
		return exitForError(ctx, err, cio)
	}
	w := cio.stdout
	fmt.Fprintf(w, "Key: %s, because %s\n", res.Key, res.Reason)
	if res.Note != "" {
		fmt.Fprintf(w, "Note: %s\n", res.Note)
	}
	fmt.Fprintf(w, "Encrypted the password into %s (mode 0600).\n", res.Output)
	if *username != "" {
		if _, err := credentials.SetUsername(*cfgPath, *username); err != nil {
			return exitForError(ctx, fmt.Errorf("setting the username: %w", err), cio)
		}
		fmt.Fprintf(w, "Username set to %s in %s.\n", *username, *cfgPath)
	} else if u, _ := credentials.ReadUsername(*cfgPath); u == "" {
		fmt.Fprintf(cio.stderr, "warning: no username in %s; add one with --username EMAIL\n", *cfgPath)
	}
	if *dropin == "" {
		fmt.Fprintf(w, "\nAdd this line to the [Service] section of surflare-watchdog.service\n(systemctl edit surflare-watchdog):\n\n  %s\n\nthen: systemctl daemon-reload && systemctl restart surflare-watchdog\n", res.UnitLine)
		return exitOK
	}
	path, err := credentials.WriteDropIn(*dropin, res.UnitLine)
	if err != nil {
		return exitForError(ctx, err, cio)
	}
	fmt.Fprintf(w, "The unit loads it through %s.\nNow: systemctl daemon-reload && systemctl restart surflare-watchdog\n", path)
	return exitOK
}
