package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"

	"surflare-watchdog/src/credentials"
)

const plantedPassword = "Pl4nted-cli-S3cret"

// credEnv is a throwaway machine: a password file path, a UCI config, and
// everything the commands printed, to grep for the password at the end.
type credEnv struct {
	file, config, encrypted string
	all                     bytes.Buffer
}

func newCredEnv(t *testing.T) *credEnv {
	t.Helper()
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	dir := t.TempDir()
	e := &credEnv{
		file:      filepath.Join(dir, "etc", "surflare", "credentials"),
		config:    filepath.Join(dir, "surflare"),
		encrypted: filepath.Join(dir, "etc", "surflare", "password.cred"),
	}
	cfg := "# hand-written\nconfig surflare 'main'\n\toption node 'Dallas'\n"
	if err := os.WriteFile(e.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if strings.Contains(e.all.String(), plantedPassword) {
			t.Errorf("a command printed the password:\n%s", e.all.String())
		}
	})
	return e
}

// run runs one credential command with stdin and returns its exit code,
// stdout and stderr.
func (e *credEnv) run(t *testing.T, main func(context.Context, []string, credIO) int, stdin string, enc credentials.EncryptOptions, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	cio := credIO{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, encrypt: enc}
	code := main(context.Background(), args, cio)
	e.all.WriteString(out.String() + errb.String())
	return code, out.String(), errb.String()
}

func (e *credEnv) flags(extra ...string) []string {
	return append(extra, "--file", e.file, "--config", e.config)
}

func TestCredentialsSetStatusClear(t *testing.T) {
	e := newCredEnv(t)
	none := credentials.EncryptOptions{}

	code, out, errs := e.run(t, credentialsMain, plantedPassword+"\n", none, e.flags("set", "--username", "lab@example.com")...)
	if code != exitOK {
		t.Fatalf("set: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "Password saved to "+e.file) || !strings.Contains(out, "Username set to lab@example.com") {
		t.Errorf("set printed:\n%s", out)
	}
	fi, err := os.Stat(e.file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("password file: %v, mode %v", err, fi.Mode())
	}
	c, err := credentials.Load(context.Background(), credentials.Options{Username: "x@y.z", File: e.file})
	if err != nil || c.Password.Reveal() != plantedPassword {
		t.Fatalf("stored password does not load: %v", err)
	}
	if u, _ := credentials.ReadUsername(e.config); u != "lab@example.com" {
		t.Errorf("username in UCI: %q", u)
	}

	code, out, _ = e.run(t, credentialsMain, "", none, e.flags("status")...)
	if code != exitOK || !strings.Contains(out, "password: stored (file, "+e.file+")") || !strings.Contains(out, "username: lab@example.com") {
		t.Errorf("status: exit %d\n%s", code, out)
	}
	code, out, _ = e.run(t, credentialsMain, "", none, e.flags("status", "--json")...)
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != exitOK {
		t.Fatalf("status --json: exit %d, %v\n%s", code, err, out)
	}
	if st["present"] != true || st["source"] != "file" || st["username"] != "lab@example.com" {
		t.Errorf("status --json = %v", st)
	}

	os.Chmod(e.file, 0o644)
	code, out, _ = e.run(t, credentialsMain, "", none, e.flags("status")...)
	if code != exitFailure || !strings.Contains(out, "not usable") || !strings.Contains(out, "chmod 600 "+e.file) {
		t.Errorf("status of a 0644 file: exit %d\n%s", code, out)
	}

	code, out, _ = e.run(t, credentialsMain, "", none, "clear", "--file", e.file, "--encrypted", e.encrypted)
	if code != exitOK || !strings.Contains(out, "Removed "+e.file) {
		t.Errorf("clear: exit %d\n%s", code, out)
	}
	code, out, _ = e.run(t, credentialsMain, "", none, e.flags("status")...)
	if code != exitFailure || !strings.Contains(out, "password: missing") {
		t.Errorf("status after clear: exit %d\n%s", code, out)
	}
}

func TestCredentialsSetRefusesThePasswordAsAnArgument(t *testing.T) {
	e := newCredEnv(t)
	code, _, errs := e.run(t, credentialsMain, "", credentials.EncryptOptions{}, e.flags("set", "hunter2")...)
	if code != exitUsage || !strings.Contains(errs, "never an argument") {
		t.Errorf("exit %d: %s", code, errs)
	}
	if strings.Contains(errs, "hunter2") {
		t.Error("the error repeats the argument")
	}
	if _, err := os.Stat(e.file); err == nil {
		t.Error("a password file was written")
	}
}

func TestCredentialsSetRejectsBadInput(t *testing.T) {
	e := newCredEnv(t)
	if code, _, _ := e.run(t, credentialsMain, "", credentials.EncryptOptions{}, e.flags("set")...); code != exitFailure {
		t.Errorf("empty stdin: exit %d", code)
	}
	if code, _, _ := e.run(t, credentialsMain, "pw\n", credentials.EncryptOptions{}, e.flags("set", "--username", "not-an-email")...); code != exitUsage {
		t.Errorf("bad username: exit %d", code)
	}
	if _, err := os.Stat(e.file); err == nil {
		t.Error("a password file was written")
	}
}

// fakeSystemdCreds answers has-tpm2 as told and "encrypts" by tagging.
func fakeSystemdCreds(hasTPM2 int, calls *[]string) credentials.Runner {
	return func(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, []byte, int, error) {
		*calls = append(*calls, strings.Join(args, " "))
		switch args[0] {
		case "has-tpm2":
			return []byte("no\n"), nil, hasTPM2, nil
		case "encrypt":
			return append([]byte("ENC:"), bytes.ToUpper(stdin)...), nil, 0, nil
		case "decrypt":
			return bytes.ToLower(bytes.TrimPrefix(stdin, []byte("ENC:"))), nil, 0, nil
		}
		return nil, nil, 1, nil
	}
}

func TestSetupAuthChoosesTheKeyAndPrintsTheUnitLine(t *testing.T) {
	for _, tc := range []struct {
		hasTPM2 int
		key     string
	}{{0, "tpm2"}, {1, "host"}} {
		t.Run(tc.key, func(t *testing.T) {
			e := newCredEnv(t)
			var calls []string
			enc := credentials.EncryptOptions{
				Run:       fakeSystemdCreds(tc.hasTPM2, &calls),
				LookPath:  func(string) (string, error) { return "/usr/bin/systemd-creds", nil },
				TPMDevice: filepath.Join(t.TempDir(), "no-tpm"),
			}
			pw := strings.ToLower(plantedPassword)
			dropin := filepath.Join(t.TempDir(), "surflare-watchdog.service.d")
			code, out, errs := e.run(t, setupAuth, pw+"\n", enc,
				"--output", e.encrypted, "--config", e.config, "--username", "lab@example.com", "--dropin", dropin)
			if code != exitOK {
				t.Fatalf("exit %d\n%s%s", code, out, errs)
			}
			if !strings.Contains(out, "Key: "+tc.key+", because") {
				t.Errorf("output does not say the key:\n%s", out)
			}
			unit, err := os.ReadFile(filepath.Join(dropin, credentials.DropInName))
			if err != nil || !strings.Contains(string(unit), "[Service]\nLoadCredentialEncrypted=surflare-password:"+e.encrypted+"\n") {
				t.Errorf("drop-in %q, %v", unit, err)
			}
			if !strings.Contains(out, credentials.DropInName) || !strings.Contains(out, "daemon-reload") {
				t.Errorf("output does not say where the unit line went:\n%s", out)
			}
			if !strings.Contains(strings.Join(calls, "\n"), "encrypt --name=surflare-password --with-key="+tc.key+" - -") {
				t.Errorf("systemd-creds calls: %q", calls)
			}
			if strings.Contains(out+errs+strings.Join(calls, " "), pw) {
				t.Error("the password appears in the output or the arguments")
			}
			data, err := os.ReadFile(e.encrypted)
			if err != nil || string(data) != "ENC:"+strings.ToUpper(pw) {
				t.Errorf("encrypted file %q, %v", data, err)
			}
			if u, _ := credentials.ReadUsername(e.config); u != "lab@example.com" {
				t.Errorf("username %q", u)
			}
			// status from a shell sees the encrypted file, not the password.
			code, out, _ = e.run(t, credentialsMain, "", credentials.EncryptOptions{}, e.flags("status", "--encrypted", e.encrypted)...)
			if code != exitOK || !strings.Contains(out, "encrypted for systemd in "+e.encrypted) {
				t.Errorf("status after setup-auth: exit %d\n%s", code, out)
			}
		})
	}
}

// Without systemd-creds, setup-auth says so and stops before asking for
// the password.
func TestSetupAuthWithoutSystemdCreds(t *testing.T) {
	e := newCredEnv(t)
	enc := credentials.EncryptOptions{LookPath: func(string) (string, error) { return "", exec.ErrNotFound }}
	stdin := &countingReader{r: strings.NewReader(plantedPassword + "\n")}
	var out, errb bytes.Buffer
	code := setupAuth(context.Background(), []string{"--output", e.encrypted}, credIO{stdin: stdin, stdout: &out, stderr: &errb, encrypt: enc})
	if code != exitFailure || !strings.Contains(errb.String(), "systemd-creds not found") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
	if stdin.n != 0 {
		t.Error("setup-auth read the password before finding out it cannot work")
	}
	if code := setupAuth(context.Background(), []string{"--with-key", "fido2"}, credIO{stdin: stdin, stdout: &out, stderr: &errb, encrypt: enc}); code != exitUsage {
		t.Errorf("unknown key: exit %d", code)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// On a terminal, `credentials set` prompts twice with echo off; nothing the
// user types shows on the screen.
func TestCredentialsSetOnATerminal(t *testing.T) {
	e := newCredEnv(t)
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	var shown strings.Builder
	// upTo reads the screen until it shows s (blocking reads: the prompt
	// comes, or the test times out).
	upTo := func(s string) {
		buf := make([]byte, 256)
		for !strings.Contains(shown.String(), s) {
			n, err := master.Read(buf)
			shown.Write(buf[:n])
			if err != nil {
				t.Fatalf("screen %q never showed %q: %v", shown.String(), s, err)
			}
		}
	}
	var out bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- credentialsMain(context.Background(), e.flags("set"), credIO{stdin: tty, stdout: &out, stderr: tty})
	}()
	upTo("Password: ")
	io.WriteString(master, plantedPassword+"\r")
	upTo("Repeat password: ")
	io.WriteString(master, plantedPassword+"\r")
	code := <-done
	tty.Close()
	rest, _ := io.ReadAll(master) // ends with EIO once the tty is closed
	shown.Write(rest)
	master.Close()
	if code != exitOK {
		t.Fatalf("exit %d; screen %q", code, shown.String())
	}
	if strings.Contains(shown.String(), plantedPassword) {
		t.Errorf("the password was echoed: %q", shown.String())
	}
	c, err := credentials.Load(context.Background(), credentials.Options{Username: "a@b.c", File: e.file})
	if err != nil || c.Password.Reveal() != plantedPassword {
		t.Fatalf("stored password: %v", err)
	}
}
