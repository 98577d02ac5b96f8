// Package credentials keeps the Surflare account password out of every place
// it could leak from: it is never in UCI, never on a command line, never in a
// log line, status output or event. The e-mail address is UCI
// surflare.main.username; the password comes from one of two sources, read in
// this order:
//
//  1. $CREDENTIALS_DIRECTORY/surflare-password — on systemd machines the
//     unit's LoadCredentialEncrypted= line makes systemd decrypt the file
//     written by `surflare-watchdog setup-auth` (TPM2 or host key) into a
//     private per-service directory; the raw password, no newline needed.
//  2. /etc/surflare/credentials — written by `surflare-watchdog credentials
//     set` or the ubus method set_credentials: mode 0600, owned by root, in a
//     0700 directory, replaced atomically.
//
// A source that is absent is skipped; a source that is present but unusable
// (group/world readable, wrong owner, unreadable, empty) is an error, never a
// silent fall-through, so a user sees why login does not happen and the
// watchdog does not start a login storm with a stale password.
//
// The file format of /etc/surflare/credentials is either
//
//	# comments and blank lines are ignored in this form
//	password=THE PASSWORD
//
// (what Store writes), or a file of exactly one line that is the password,
// verbatim. A trailing newline (LF or CRLF) is never part of the password;
// every other byte is, spaces included. A password that itself begins with
// "password=" must be written in the first form.
//
// A password is held in a Secret, which prints as "[redacted]" through fmt,
// slog and JSON; only Secret.Reveal gives the text.
package credentials

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Paths and names shared with the systemd unit and setup-auth.
const (
	// DefaultFile is the password file on routers (and laptops without
	// systemd credentials).
	DefaultFile = "/etc/surflare/credentials"
	// SystemdCredentialName is the credential's name: the file name under
	// $CREDENTIALS_DIRECTORY and the --name given to systemd-creds encrypt,
	// which must match or decryption fails.
	SystemdCredentialName = "surflare-password"
	// DefaultEncryptedFile is where setup-auth writes the encrypted
	// credential that the unit's LoadCredentialEncrypted= line names.
	DefaultEncryptedFile = "/etc/surflare/password.cred"
	// DefaultConfigFile is the UCI config that holds main.username.
	DefaultConfigFile = "/etc/config/surflare"
	// credentialsDirEnv is set by systemd for a unit with credentials.
	credentialsDirEnv = "CREDENTIALS_DIRECTORY"
)

// Source says where a password came from.
type Source string

// The sources, in the order Load tries them.
const (
	SourceSystemd Source = "systemd" // $CREDENTIALS_DIRECTORY/surflare-password
	SourceFile    Source = "file"    // /etc/surflare/credentials
)

// Errors a caller tells apart with errors.Is. Each returned error wraps one
// of them with the path and what to do about it.
var (
	// ErrNoCredentials: nothing to log in with — no password in any source,
	// an empty one, or no username. The engine shows "credentials missing"
	// and does not try to log in.
	ErrNoCredentials = errors.New("credentials missing")
	// ErrInsecure: the password file exists but others could read or
	// replace it (mode, owner, symlink); it is not used until fixed.
	ErrInsecure = errors.New("credential file is not private")
	// ErrUnreadable: the password source exists but cannot be read or
	// parsed (permission denied, not a regular file, malformed, too big).
	ErrUnreadable = errors.New("credential file unreadable")
)

// Options says where to look. The zero value means the defaults.
type Options struct {
	// Username is the account e-mail (UCI main.username), copied into the
	// Credentials that Load returns.
	Username string
	// File is the password file; "" means DefaultFile.
	File string
	// CredentialsDir is systemd's credential directory; "" means
	// $CREDENTIALS_DIRECTORY, and none when that is unset.
	CredentialsDir string
	// ConfigFile is the UCI config whose main.username Store sets; ""
	// means DefaultConfigFile.
	ConfigFile string
}

func (o Options) file() string {
	if o.File == "" {
		return DefaultFile
	}
	return o.File
}

func (o Options) configFile() string {
	if o.ConfigFile == "" {
		return DefaultConfigFile
	}
	return o.ConfigFile
}

// source is one place a password may be, with the checks that apply to it.
type source struct {
	kind Source
	path string
	// private: the file must be 0600-or-stricter and owned by us. systemd's
	// credential directory is private by construction (ramfs, per service,
	// 0400 files owned by the service user), so it is not checked.
	private bool
}

// sources lists the places to look, in order.
func (o Options) sources() []source {
	var out []source
	dir := o.CredentialsDir
	if dir == "" {
		dir = os.Getenv(credentialsDirEnv)
	}
	if dir != "" {
		out = append(out, source{SourceSystemd, filepath.Join(dir, SystemdCredentialName), false})
	}
	return append(out, source{SourceFile, o.file(), true})
}

// Credentials are what `surflare login` needs.
type Credentials struct {
	Username string
	Password Secret
	Source   Source // where the password came from
	Path     string // the file it was read from
}

// Load returns the username and the password from the first source that has
// one (see the package comment for the order). The error wraps
// ErrNoCredentials, ErrInsecure or ErrUnreadable and says how to fix it; it
// never contains the password.
func Load(ctx context.Context, opts Options) (Credentials, error) {
	if err := ctx.Err(); err != nil {
		return Credentials{}, err
	}
	src, pw, err := find(opts)
	if err != nil {
		return Credentials{}, err
	}
	if opts.Username == "" {
		return Credentials{}, fmt.Errorf("%w: no username (set it with `surflare-watchdog credentials set --username EMAIL` or uci set surflare.main.username=EMAIL)", ErrNoCredentials)
	}
	return Credentials{Username: opts.Username, Password: pw, Source: src.kind, Path: src.path}, nil
}

// find returns the first source holding a password. An absent source is
// skipped; a present but unusable one stops the search with its error.
func find(opts Options) (source, Secret, error) {
	srcs := opts.sources()
	var tried []string
	for _, src := range srcs {
		pw, err := readPasswordFile(src.path, src.private)
		if errors.Is(err, errAbsent) {
			tried = append(tried, src.path)
			continue
		}
		if err != nil {
			return src, Secret{}, err
		}
		return src, pw, nil
	}
	return source{}, Secret{}, fmt.Errorf("%w: no password in %s (set one with `surflare-watchdog credentials set`)",
		ErrNoCredentials, strings.Join(tried, " or "))
}

// Password returns a function that loads the password afresh on every call,
// for surflare.Options.Password: a password changed with `credentials set`
// or ubus is used at the next login without a restart.
func Password(opts Options) func() (string, error) {
	return func() (string, error) {
		_, pw, err := find(opts)
		if err != nil {
			return "", err
		}
		return pw.Reveal(), nil
	}
}

// StatusInfo describes the credentials without the password: safe for
// `credentials status`, ubus, the API and the LuCI page.
type StatusInfo struct {
	// Present: a password was found and is usable.
	Present  bool   `json:"present"`
	Source   Source `json:"source,omitempty"`
	Path     string `json:"path,omitempty"`
	Username string `json:"username,omitempty"`
	// Problem is why a login cannot happen ("" when it can): no password,
	// an unsafe or unreadable file, or no username.
	Problem string `json:"problem,omitempty"`
}

// Status says whether credentials exist and where they come from; it never
// includes the password.
func Status(opts Options) StatusInfo {
	st := StatusInfo{Username: opts.Username}
	src, _, err := find(opts)
	switch {
	case err != nil:
		// src is set when one file is at fault, zero when none exists.
		st.Problem, st.Source, st.Path = err.Error(), src.kind, src.path
	default:
		st.Present, st.Source, st.Path = true, src.kind, src.path
		if opts.Username == "" {
			st.Problem = "no username (set it with `surflare-watchdog credentials set --username EMAIL`)"
		}
	}
	return st
}

// Store saves a password in the password file (atomically, mode 0600, see
// WriteFile) and, when username is not empty, sets UCI main.username in
// opts.ConfigFile, keeping the rest of that file byte for byte. This is what
// the ubus method set_credentials calls. A password held by systemd
// ($CREDENTIALS_DIRECTORY) still wins over the file; Status shows which one
// is used.
func Store(ctx context.Context, opts Options, username, password string) error {
	if err := ValidatePassword(password); err != nil {
		return err
	}
	if username != "" {
		if err := ValidateUsername(username); err != nil {
			return err
		}
	}
	if err := WriteFile(ctx, opts.file(), NewSecret(password)); err != nil {
		return err
	}
	if username == "" {
		return nil
	}
	if _, err := SetUsername(opts.configFile(), username); err != nil {
		return fmt.Errorf("password saved, but setting the username failed: %w", err)
	}
	return nil
}

// Clear removes the password file. It reports whether there was one. A
// systemd credential is not touched: it belongs to the unit
// (LoadCredentialEncrypted=) and its .cred file.
func Clear(ctx context.Context, opts Options) (removed bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return removeFile(opts.file())
}

// maxPasswordLen bounds a password; the file reader refuses larger files.
const maxPasswordLen = 4096

// ValidatePassword checks that a password can be stored and typed at a
// prompt: not empty, one line, no NUL, at most 4096 bytes. The error never
// contains the password.
func ValidatePassword(pw string) error {
	switch {
	case pw == "":
		return errors.New("the password is empty")
	case len(pw) > maxPasswordLen:
		return fmt.Errorf("the password is longer than %d bytes", maxPasswordLen)
	case strings.ContainsAny(pw, "\n\r\x00"):
		return errors.New("the password contains a line break or NUL byte")
	}
	return nil
}

// ValidateUsername checks that a username looks like the account e-mail:
// an @, no spaces or control characters.
func ValidateUsername(u string) error {
	if u == "" {
		return errors.New("the username is empty")
	}
	if len(u) > 254 {
		return fmt.Errorf("the username %.40q... is longer than 254 bytes", u)
	}
	for _, r := range u {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("the username %q contains a space or control character", u)
		}
	}
	if !strings.Contains(u, "@") {
		return fmt.Errorf("the username %q is not an e-mail address (no @)", u)
	}
	return nil
}
