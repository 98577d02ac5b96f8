package credentials

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeCreds plays systemd-creds: "encryption" is base64 with a key tag,
// has-tpm2 answers as configured, and every call is recorded.
type fakeCreds struct {
	mu         sync.Mutex
	calls      [][]string
	stdins     [][]byte
	hasTPM2    int    // exit code of has-tpm2
	failKey    string // encrypt with this key fails
	echoInput  bool   // a failing encrypt prints its input to stderr
	badDecrypt bool
}

func (f *fakeCreds) run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, []byte, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, append([]string{name}, args...))
	f.stdins = append(f.stdins, bytes.Clone(stdin))
	switch args[0] {
	case "has-tpm2":
		if f.hasTPM2 == 0 {
			return []byte("yes\n+firmware\n"), nil, 0, nil
		}
		return []byte("partial\n-firmware\n"), nil, f.hasTPM2, nil
	case "encrypt":
		key := strings.TrimPrefix(args[2], "--with-key=")
		if key == f.failKey {
			msg := "TPM2 support not installed: Operation not supported\n"
			if f.echoInput {
				msg = "cannot encrypt " + string(stdin) + "\n"
			}
			return nil, []byte(msg), 1, nil
		}
		return []byte(key + ":" + base64.StdEncoding.EncodeToString(stdin) + "\n"), nil, 0, nil
	case "decrypt":
		_, b64, _ := strings.Cut(strings.TrimSpace(string(stdin)), ":")
		plain, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, []byte("bad credential"), 1, nil
		}
		if f.badDecrypt {
			plain = append(plain, 'X')
		}
		return plain, nil, 0, nil
	}
	return nil, []byte("unknown verb"), 1, nil
}

// keys returns the --with-key of every encrypt call.
func (f *fakeCreds) keys() []string {
	var out []string
	for _, c := range f.calls {
		if c[1] == "encrypt" {
			out = append(out, c[3])
		}
	}
	return out
}

func fakeOpts(t *testing.T, f *fakeCreds) EncryptOptions {
	t.Helper()
	dir := t.TempDir()
	return EncryptOptions{
		Output:    filepath.Join(dir, "etc", "surflare", "password.cred"),
		TPMDevice: filepath.Join(dir, "sys", "tpm0"),
		Run:       f.run,
		LookPath:  func(string) (string, error) { return "/usr/bin/systemd-creds", nil },
	}
}

func TestEncryptChoosesTPM2WhenSystemdSaysSo(t *testing.T) {
	f := &fakeCreds{hasTPM2: 0}
	o := fakeOpts(t, f)
	res, err := EncryptForSystemd(context.Background(), o, NewSecret(planted))
	if err != nil {
		t.Fatal(err)
	}
	if res.Key != KeyTPM2 || !strings.Contains(res.Reason, "has-tpm2: yes") || res.Note != "" {
		t.Errorf("result %+v, want tpm2 because has-tpm2 said yes", res)
	}
	if got := f.keys(); len(got) != 1 || got[0] != "--with-key=tpm2" {
		t.Errorf("encrypt keys %v", got)
	}
	want := []string{"/usr/bin/systemd-creds", "encrypt", "--name=surflare-password", "--with-key=tpm2", "-", "-"}
	if strings.Join(f.calls[1], " ") != strings.Join(want, " ") {
		t.Errorf("encrypt call %q, want %q", f.calls[1], want)
	}
	if string(f.stdins[1]) != planted {
		t.Error("the password did not go to systemd-creds on stdin")
	}
	for _, c := range f.calls {
		assertNoLeak(t, "systemd-creds arguments", strings.Join(c, " "))
	}
	data, err := os.ReadFile(o.Output)
	if err != nil || !strings.HasPrefix(string(data), "tpm2:") {
		t.Fatalf("output %q, %v", data, err)
	}
	assertNoLeak(t, "encrypted file", string(data))
	fi, _ := os.Stat(o.Output)
	di, _ := os.Stat(filepath.Dir(o.Output))
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Errorf("modes file %04o dir %04o, want 0600 and 0700", fi.Mode().Perm(), di.Mode().Perm())
	}
	if res.UnitLine != "LoadCredentialEncrypted=surflare-password:"+o.Output {
		t.Errorf("unit line %q", res.UnitLine)
	}
}

func TestEncryptUsesTheHostKeyWithoutATPM(t *testing.T) {
	f := &fakeCreds{hasTPM2: 11}
	o := fakeOpts(t, f)
	res, err := EncryptForSystemd(context.Background(), o, NewSecret(planted))
	if err != nil {
		t.Fatal(err)
	}
	if res.Key != KeyHost || !strings.Contains(res.Reason, "no TPM2") || !strings.Contains(res.Reason, "partial") {
		t.Errorf("result %+v, want host because there is no TPM2", res)
	}
	if got := f.keys(); len(got) != 1 || got[0] != "--with-key=host" {
		t.Errorf("encrypt keys %v", got)
	}
}

func TestEncryptTrustsSysfsWhenHasTPM2DoesNotSayYes(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    Key
	}{{"2\n", KeyTPM2}, {"1\n", KeyHost}} {
		f := &fakeCreds{hasTPM2: 1}
		o := fakeOpts(t, f)
		os.MkdirAll(o.TPMDevice, 0o755)
		os.WriteFile(filepath.Join(o.TPMDevice, "tpm_version_major"), []byte(tc.version), 0o644)
		res, err := EncryptForSystemd(context.Background(), o, NewSecret(planted))
		if err != nil {
			t.Fatal(err)
		}
		if res.Key != tc.want {
			t.Errorf("tpm_version_major %q: key %s (%s), want %s", tc.version, res.Key, res.Reason, tc.want)
		}
	}
}

func TestEncryptFallsBackToHostWhenTPM2Fails(t *testing.T) {
	f := &fakeCreds{hasTPM2: 0, failKey: "tpm2"}
	res, err := EncryptForSystemd(context.Background(), fakeOpts(t, f), NewSecret(planted))
	if err != nil {
		t.Fatal(err)
	}
	if res.Key != KeyHost || !strings.Contains(res.Note, "TPM2 encryption failed") {
		t.Errorf("result %+v, want a fallback to host with a note", res)
	}
	if got := f.keys(); strings.Join(got, ",") != "--with-key=tpm2,--with-key=host" {
		t.Errorf("encrypt keys %v", got)
	}
}

func TestEncryptExplicitKeyDoesNotFallBack(t *testing.T) {
	f := &fakeCreds{failKey: "tpm2", echoInput: true}
	o := fakeOpts(t, f)
	o.Key = KeyTPM2
	_, err := EncryptForSystemd(context.Background(), o, NewSecret(planted))
	if err == nil || !strings.Contains(err.Error(), "--with-key=tpm2") {
		t.Fatalf("explicit tpm2 failing: %v", err)
	}
	assertNoLeak(t, "error built from systemd-creds' stderr", err.Error())
	if len(f.keys()) != 1 || f.calls[0][1] == "has-tpm2" {
		t.Errorf("calls %v: an explicit key needs no detection and no retry", f.calls)
	}
	if _, err := os.Stat(o.Output); err == nil {
		t.Error("a failed encryption left a file")
	}
}

func TestEncryptChecksTheRoundTrip(t *testing.T) {
	f := &fakeCreds{badDecrypt: true}
	o := fakeOpts(t, f)
	_, err := EncryptForSystemd(context.Background(), o, NewSecret(planted))
	if err == nil || !strings.Contains(err.Error(), "decrypt") {
		t.Fatalf("bad round trip: %v", err)
	}
	if _, err := os.Stat(o.Output); err == nil {
		t.Error("a credential that does not decrypt was written")
	}
}

func TestEncryptWithoutSystemdCreds(t *testing.T) {
	f := &fakeCreds{}
	o := fakeOpts(t, f)
	o.LookPath = func(string) (string, error) { return "", exec.ErrNotFound }
	_, err := EncryptForSystemd(context.Background(), o, NewSecret(planted))
	if !errors.Is(err, ErrNoSystemdCreds) || !strings.Contains(err.Error(), "credentials set") {
		t.Fatalf("no systemd-creds: %v", err)
	}
	if len(f.calls) != 0 {
		t.Errorf("ran %v without systemd-creds", f.calls)
	}
}

// The real systemd-creds with the host key, its secret in a temporary file
// (SYSTEMD_CREDENTIAL_SECRET) so the machine's own is not created or used;
// then what systemd would put in $CREDENTIALS_DIRECTORY is what Load reads.
func TestEncryptWithRealSystemdCreds(t *testing.T) {
	bin, err := exec.LookPath("systemd-creds")
	if err != nil {
		t.Skip("systemd-creds not installed")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: systemd-creds encrypts with the host key only as root")
	}
	dir := t.TempDir()
	t.Setenv("SYSTEMD_CREDENTIAL_SECRET", filepath.Join(dir, "host.secret"))
	o := EncryptOptions{Output: filepath.Join(dir, "password.cred"), Key: KeyHost}
	res, err := EncryptForSystemd(context.Background(), o, NewSecret(planted))
	if err != nil {
		t.Fatal(err)
	}
	if res.Key != KeyHost {
		t.Errorf("key %s", res.Key)
	}
	data, _ := os.ReadFile(o.Output)
	assertNoLeak(t, "encrypted file", string(data))

	// systemd decrypts it into the service's credential directory.
	credDir := filepath.Join(dir, "credentials")
	os.Mkdir(credDir, 0o700)
	out, err := exec.Command(bin, "decrypt", "--name="+SystemdCredentialName, o.Output, filepath.Join(credDir, SystemdCredentialName)).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-creds decrypt: %v: %s", err, out)
	}
	c, err := Load(context.Background(), Options{Username: "a@b.c", CredentialsDir: credDir, File: filepath.Join(dir, "none")})
	if err != nil || c.Source != SourceSystemd || c.Password.Reveal() != planted {
		t.Fatalf("Load from the decrypted credential: %v, source %s", err, c.Source)
	}
}
