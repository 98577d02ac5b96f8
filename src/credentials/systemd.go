package credentials

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Key says what systemd-creds binds the encrypted password to.
type Key string

// The choices of setup-auth's --with-key.
const (
	// KeyAuto picks KeyTPM2 when the machine has a TPM 2.0, KeyHost
	// otherwise (what the original setup_auth.sh did).
	KeyAuto Key = "auto"
	// KeyTPM2 binds to this machine's TPM: the file is useless on any
	// other machine, and survives a reinstall only with the same TPM.
	KeyTPM2 Key = "tpm2"
	// KeyHost binds to /var/lib/systemd/credential.secret: protects the
	// file when copied off the disk, not from root on this machine.
	KeyHost Key = "host"
)

// ParseKey checks a --with-key value.
func ParseKey(s string) (Key, error) {
	switch k := Key(s); k {
	case KeyAuto, KeyTPM2, KeyHost:
		return k, nil
	case "":
		return KeyAuto, nil
	}
	return "", fmt.Errorf("unknown key %q: use auto, tpm2 or host", s)
}

// ErrNoSystemdCreds: systemd-creds is not installed (not a systemd
// machine, or systemd older than 250); setup-auth cannot work there.
var ErrNoSystemdCreds = errors.New("systemd-creds not found")

// Runner runs one command with stdin and returns its stdout, stderr and
// exit code. err is for a command that could not be run at all; a non-zero
// exit is not an error. Tests replace it; the real one is ExecRunner.
type Runner func(ctx context.Context, stdin []byte, name string, args ...string) (stdout, stderr []byte, code int, err error)

// ExecRunner runs the command with os/exec. The password reaches it on
// stdin only, never in its arguments; no descriptor of ours is inherited
// (Go opens every file close-on-exec).
func ExecRunner(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, []byte, int, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && ctx.Err() == nil {
		return out.Bytes(), errb.Bytes(), exit.ExitCode(), nil
	}
	if err != nil {
		return out.Bytes(), errb.Bytes(), -1, err
	}
	return out.Bytes(), errb.Bytes(), 0, nil
}

// EncryptOptions configure EncryptForSystemd. The zero value is the real
// machine's defaults.
type EncryptOptions struct {
	Output       string        // encrypted file; "" means DefaultEncryptedFile
	Key          Key           // "" means KeyAuto
	SystemdCreds string        // the binary; "" means "systemd-creds" in $PATH
	TPMDevice    string        // sysfs dir of the TPM; "" means /sys/class/tpm/tpm0
	Timeout      time.Duration // each systemd-creds call; 0 means 30 s (a TPM is slow)
	Run          Runner        // nil means ExecRunner
	// LookPath finds the binary; nil means exec.LookPath.
	LookPath func(string) (string, error)
}

// EncryptResult says what EncryptForSystemd did, for the user.
type EncryptResult struct {
	Key    Key    // the key the file is bound to
	Reason string // why that key ("systemd-creds has-tpm2: yes", ...)
	// Note is set when auto mode fell back from tpm2 to host.
	Note     string
	Output   string // the encrypted file written
	UnitLine string // the line for the unit's [Service] section
}

const (
	defaultTPMDevice   = "/sys/class/tpm/tpm0"
	defaultCredTimeout = 30 * time.Second
)

// EncryptForSystemd does what setup_auth.sh did: encrypt the password with
// `systemd-creds encrypt --name=surflare-password --with-key=KEY - -`
// (password on stdin, ciphertext on stdout), checks that `systemd-creds
// decrypt` gives the same password back, and writes the ciphertext
// atomically to opts.Output (0600, directory 0700). With KeyAuto it uses
// the TPM when `systemd-creds has-tpm2` says yes, or when sysfs shows a
// TPM 2.0 device; if TPM encryption then fails, it falls back to the host
// key and says so. Errors never contain the password.
func EncryptForSystemd(ctx context.Context, opts EncryptOptions, pw Secret) (EncryptResult, error) {
	if err := ValidatePassword(pw.Reveal()); err != nil {
		return EncryptResult{}, err
	}
	o := opts.withDefaults()
	bin, err := o.FindSystemdCreds()
	if err != nil {
		return EncryptResult{}, err
	}
	res := EncryptResult{Key: o.Key, Reason: "chosen with --with-key", Output: o.Output}
	if o.Key == KeyAuto {
		res.Key, res.Reason = o.detectTPM2(ctx, bin)
	}
	cred, err := o.encrypt(ctx, bin, res.Key, pw)
	if err != nil && opts.keyOrAuto() == KeyAuto && res.Key == KeyTPM2 {
		res.Note = fmt.Sprintf("TPM2 encryption failed (%v); used the host key instead", err)
		res.Key = KeyHost
		cred, err = o.encrypt(ctx, bin, KeyHost, pw)
	}
	if err != nil {
		return EncryptResult{}, err
	}
	if err := ensurePrivateDir(filepath.Dir(o.Output)); err != nil {
		return EncryptResult{}, err
	}
	if err := replaceFile(ctx, o.Output, cred, fileMode, -1, -1); err != nil {
		return EncryptResult{}, err
	}
	res.UnitLine = "LoadCredentialEncrypted=" + SystemdCredentialName + ":" + o.Output
	return res, nil
}

// FindSystemdCreds returns the path of systemd-creds, or an error wrapping
// ErrNoSystemdCreds that tells the user what to do instead; setup-auth
// checks it before asking for the password.
func (o EncryptOptions) FindSystemdCreds() (string, error) {
	o = o.withDefaults()
	bin, err := o.LookPath(o.SystemdCreds)
	if err != nil {
		return "", fmt.Errorf("%w (%s): setup-auth needs systemd 250 or later; without systemd, use `surflare-watchdog credentials set`", ErrNoSystemdCreds, o.SystemdCreds)
	}
	return bin, nil
}

func (o EncryptOptions) keyOrAuto() Key {
	if o.Key == "" {
		return KeyAuto
	}
	return o.Key
}

func (o EncryptOptions) withDefaults() EncryptOptions {
	o.Key = o.keyOrAuto()
	if o.Output == "" {
		o.Output = DefaultEncryptedFile
	}
	if o.SystemdCreds == "" {
		o.SystemdCreds = "systemd-creds"
	}
	if o.TPMDevice == "" {
		o.TPMDevice = defaultTPMDevice
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultCredTimeout
	}
	if o.Run == nil {
		o.Run = ExecRunner
	}
	if o.LookPath == nil {
		o.LookPath = exec.LookPath
	}
	return o
}

// run calls systemd-creds with a timeout.
func (o EncryptOptions) run(ctx context.Context, stdin []byte, bin string, args ...string) ([]byte, []byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	return o.Run(ctx, stdin, bin, args...)
}

// detectTPM2 decides between tpm2 and host and says why.
func (o EncryptOptions) detectTPM2(ctx context.Context, bin string) (Key, string) {
	out, _, code, err := o.run(ctx, nil, bin, "has-tpm2")
	verdict := firstLine(out)
	if err == nil && code == 0 {
		return KeyTPM2, "systemd-creds has-tpm2: " + orDefault(verdict, "yes")
	}
	if v, err := os.ReadFile(filepath.Join(o.TPMDevice, "tpm_version_major")); err == nil {
		if strings.TrimSpace(string(v)) == "2" {
			return KeyTPM2, o.TPMDevice + " is a TPM 2.0"
		}
	} else if _, err := os.Stat(o.TPMDevice); err == nil {
		// Kernels before 5.x have no version attribute; a TPM there is
		// worth a try, and a failure falls back to the host key.
		return KeyTPM2, o.TPMDevice + " exists"
	}
	return KeyHost, fmt.Sprintf("no TPM2 (systemd-creds has-tpm2: %s; %s absent)", orDefault(verdict, "no"), o.TPMDevice)
}

// encrypt runs systemd-creds encrypt and checks the result decrypts to the
// same password; it returns the ciphertext.
func (o EncryptOptions) encrypt(ctx context.Context, bin string, key Key, pw Secret) ([]byte, error) {
	name := "--name=" + SystemdCredentialName
	plain := []byte(pw.Reveal())
	defer clear(plain)
	out, errb, code, err := o.run(ctx, plain, bin, "encrypt", name, "--with-key="+string(key), "-", "-")
	if err == nil && code != 0 {
		err = fmt.Errorf("exit code %d: %s", code, lastLine(errb))
	}
	if err == nil && len(bytes.TrimSpace(out)) == 0 {
		err = errors.New("it wrote nothing")
	}
	if err != nil {
		return nil, scrub(fmt.Errorf("systemd-creds encrypt --with-key=%s: %w", key, err), pw)
	}
	back, errb, code, err := o.run(ctx, out, bin, "decrypt", name, "-", "-")
	defer clear(back)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit code %d: %s", code, lastLine(errb))
	}
	if err == nil && !bytes.Equal(back, plain) {
		err = errors.New("it decrypts to something else")
	}
	if err != nil {
		return nil, scrub(fmt.Errorf("checking the encrypted credential with systemd-creds decrypt: %w", err), pw)
	}
	return out, nil
}

// scrub removes the password from an error built from a child's output,
// in case a tool ever echoes its input.
func scrub(err error, pw Secret) error {
	msg := err.Error()
	if p := pw.Reveal(); p != "" && strings.Contains(msg, p) {
		return errors.New(strings.ReplaceAll(msg, p, Redacted))
	}
	return err
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return orDefault(s, "no message")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
