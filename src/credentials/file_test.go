package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testOpts is a file in a fresh directory, no systemd credentials.
func testOpts(t *testing.T) Options {
	t.Helper()
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	dir := t.TempDir()
	return Options{
		Username:   "user@example.com",
		File:       filepath.Join(dir, "etc", "surflare", "credentials"),
		ConfigFile: filepath.Join(dir, "surflare"),
	}
}

func writeRaw(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// dirNames lists a directory, to catch left-over temporary files.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestStoreCreatesPrivateFileEvenWithOpenUmask(t *testing.T) {
	opts := testOpts(t)
	old := syscall.Umask(0) // a careless writer would create 0666/0777 now
	t.Cleanup(func() { syscall.Umask(old) })
	if err := Store(context.Background(), opts, "", planted); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(opts.File)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %04o, want 0600", fi.Mode().Perm())
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Geteuid() {
		t.Errorf("file owner %d, want %d", st.Uid, os.Geteuid())
	}
	di, err := os.Stat(filepath.Dir(opts.File))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("created directory mode %04o, want 0700", di.Mode().Perm())
	}
	if names := dirNames(t, filepath.Dir(opts.File)); len(names) != 1 || names[0] != "credentials" {
		t.Errorf("directory holds %v, want just credentials (no temporary files)", names)
	}
	c, err := Load(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if c.Password.Reveal() != planted || c.Source != SourceFile || c.Path != opts.File || c.Username != "user@example.com" {
		t.Errorf("Load = %+v (password ok: %v)", c, c.Password.Reveal() == planted)
	}
}

func TestStoreReplacesALooseFileWithAPrivateOne(t *testing.T) {
	opts := testOpts(t)
	writeRaw(t, opts.File, "old\n", 0o644)
	if err := Store(context.Background(), opts, "", "new password"); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(opts.File)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after Store %04o, want 0600", fi.Mode().Perm())
	}
	c, err := Load(context.Background(), opts)
	if err != nil || c.Password.Reveal() != "new password" {
		t.Fatalf("Load after Store: %v (password ok: %v)", err, c.Password.Reveal() == "new password")
	}
}

func TestStoreRefusesADirectoryOthersCanWrite(t *testing.T) {
	opts := testOpts(t)
	dir := filepath.Dir(opts.File)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	err := Store(context.Background(), opts, "", planted)
	if !errors.Is(err, ErrInsecure) || !strings.Contains(err.Error(), "chmod 700 "+dir) {
		t.Fatalf("Store into a 0777 directory: %v, want ErrInsecure with the fix", err)
	}
	if _, err := os.Stat(opts.File); err == nil {
		t.Error("the password was written anyway")
	}
}

// Concurrent writers never produce a partial file and never leave their
// temporary files; concurrent readers always see one complete password.
func TestConcurrentWritersAndReaders(t *testing.T) {
	opts := testOpts(t)
	if err := Store(context.Background(), opts, "", "initial"); err != nil {
		t.Fatal(err)
	}
	const writers, rounds = 8, 20
	valid := map[string]bool{"initial": true}
	for w := 0; w < writers; w++ {
		for r := 0; r < rounds; r++ {
			valid[fmt.Sprintf("writer-%d-round-%d-%s", w, r, strings.Repeat("x", 200))] = true
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var readErr error
	var readerDone sync.WaitGroup
	readerDone.Add(1)
	go func() {
		defer readerDone.Done()
		for ctx.Err() == nil {
			c, err := Load(ctx, opts)
			if err != nil && ctx.Err() == nil {
				readErr = err
				return
			}
			if err == nil && !valid[c.Password.Reveal()] {
				readErr = errors.New("read a password nobody wrote (partial file?)")
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				errs <- Store(ctx, opts, "", fmt.Sprintf("writer-%d-round-%d-%s", w, r, strings.Repeat("x", 200)))
			}
		}()
	}
	wg.Wait()
	cancel()
	readerDone.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Store: %v", err)
		}
	}
	if readErr != nil {
		t.Fatalf("concurrent Load: %v", readErr)
	}
	if names := dirNames(t, filepath.Dir(opts.File)); len(names) != 1 {
		t.Errorf("directory holds %v after concurrent writes, want just the file", names)
	}
	c, err := Load(context.Background(), opts)
	if err != nil || !valid[c.Password.Reveal()] {
		t.Fatalf("final Load: %v", err)
	}
}

func TestLoadRefusesFilesOthersCanRead(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620, 0o660, 0o666} {
		t.Run(fmt.Sprintf("%04o", mode), func(t *testing.T) {
			opts := testOpts(t)
			writeRaw(t, opts.File, planted+"\n", mode)
			_, err := Load(context.Background(), opts)
			if !errors.Is(err, ErrInsecure) {
				t.Fatalf("Load of a %04o file: %v, want ErrInsecure", mode, err)
			}
			if !strings.Contains(err.Error(), "chmod 600 "+opts.File) {
				t.Errorf("error %q does not say how to fix it", err)
			}
			assertNoLeak(t, "error", err.Error())
			st := Status(opts)
			if st.Present || st.Source != SourceFile || !strings.Contains(st.Problem, "chmod 600") {
				t.Errorf("Status = %+v, want not present, source file, a chmod hint", st)
			}
		})
	}
}

func TestLoadRefusesAFileOwnedBySomeoneElse(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: chown to another user")
	}
	opts := testOpts(t)
	writeRaw(t, opts.File, planted+"\n", 0o600)
	if err := os.Chown(opts.File, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := Load(context.Background(), opts)
	if !errors.Is(err, ErrInsecure) || !strings.Contains(err.Error(), "chown 0 "+opts.File) {
		t.Fatalf("Load of a file owned by nobody: %v, want ErrInsecure with a chown hint", err)
	}
}

func TestLoadRefusesSymlinkAndOddFiles(t *testing.T) {
	t.Run("symlink", func(t *testing.T) {
		opts := testOpts(t)
		target := filepath.Join(t.TempDir(), "elsewhere")
		writeRaw(t, target, planted, 0o600)
		os.MkdirAll(filepath.Dir(opts.File), 0o700)
		if err := os.Symlink(target, opts.File); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(context.Background(), opts); !errors.Is(err, ErrInsecure) {
			t.Fatalf("Load through a symlink: %v, want ErrInsecure", err)
		}
	})
	t.Run("directory", func(t *testing.T) {
		opts := testOpts(t)
		os.MkdirAll(opts.File, 0o700)
		if _, err := Load(context.Background(), opts); !errors.Is(err, ErrUnreadable) {
			t.Fatalf("Load of a directory: %v, want ErrUnreadable", err)
		}
	})
	t.Run("fifo does not block", func(t *testing.T) {
		opts := testOpts(t)
		os.MkdirAll(filepath.Dir(opts.File), 0o700)
		if err := syscall.Mkfifo(opts.File, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := Load(context.Background(), opts); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrUnreadable) {
				t.Fatalf("Load of a FIFO: %v, want ErrUnreadable", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Load blocked on a FIFO")
		}
	})
}

func TestMissingCredentialsAreATypedError(t *testing.T) {
	opts := testOpts(t)
	_, err := Load(context.Background(), opts)
	if !errors.Is(err, ErrNoCredentials) || !strings.Contains(err.Error(), opts.File) {
		t.Fatalf("Load without a file: %v, want ErrNoCredentials naming %s", err, opts.File)
	}
	if st := Status(opts); st.Present || st.Source != "" || !strings.Contains(st.Problem, "credentials set") {
		t.Errorf("Status without a file = %+v", st)
	}
	writeRaw(t, opts.File, "\n", 0o600)
	if _, err := Load(context.Background(), opts); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("Load of an empty file: %v, want ErrNoCredentials", err)
	}
	writeRaw(t, opts.File, planted, 0o600)
	opts.Username = ""
	if _, err := Load(context.Background(), opts); !errors.Is(err, ErrNoCredentials) || !strings.Contains(err.Error(), "username") {
		t.Errorf("Load without a username: %v, want ErrNoCredentials about the username", err)
	}
	if st := Status(opts); !st.Present || !strings.Contains(st.Problem, "username") {
		t.Errorf("Status without a username = %+v, want present with a username problem", st)
	}
}

func TestFileForms(t *testing.T) {
	cases := []struct {
		name, content, want string
		err                 error
	}{
		{"raw line", "hunter2\n", "hunter2", nil},
		{"raw no newline", "hunter2", "hunter2", nil},
		{"raw CRLF", "hunter2\r\n", "hunter2", nil},
		{"raw keeps spaces", " two words \n", " two words ", nil},
		{"raw hash is a password", "#not-a-comment\n", "#not-a-comment", nil},
		{"key form", "# comment\n\npassword=a=b c\n", "a=b c", nil},
		{"key form CRLF", "password=x\r\n", "x", nil},
		{"two raw lines", "line-one-SECRETA\nline-two-SECRETB\n", "", ErrUnreadable},
		{"two keys", "password=SECRETA\npassword=SECRETB\n", "", ErrUnreadable},
		{"junk with key", "SECRETA\npassword=SECRETB\n", "", ErrUnreadable},
		{"empty key", "password=\n", "", ErrNoCredentials},
		{"blank", "", "", ErrNoCredentials},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOpts(t)
			writeRaw(t, opts.File, tc.content, 0o600)
			c, err := Load(context.Background(), opts)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Load: %v, want %v", err, tc.err)
				}
				if strings.Contains(err.Error(), "SECRET") {
					t.Errorf("error quotes the file: %v", err)
				}
				return
			}
			if err != nil || c.Password.Reveal() != tc.want {
				t.Fatalf("Load: %v, password %q, want %q", err, c.Password.Reveal(), tc.want)
			}
		})
	}
}

func TestSourceOrder(t *testing.T) {
	opts := testOpts(t)
	writeRaw(t, opts.File, "from-file\n", 0o600)
	credDir := t.TempDir()

	// systemd's directory without our credential: the file is used.
	opts.CredentialsDir = credDir
	if c, err := Load(context.Background(), opts); err != nil || c.Source != SourceFile {
		t.Fatalf("credential dir without surflare-password: %v, source %q, want file", err, c.Source)
	}
	// systemd's credential wins, with no mode check (0400, or 0440 with a
	// group, is how systemd hands it over).
	writeRaw(t, filepath.Join(credDir, SystemdCredentialName), "from-systemd", 0o440)
	c, err := Load(context.Background(), opts)
	if err != nil || c.Source != SourceSystemd || c.Password.Reveal() != "from-systemd" {
		t.Fatalf("both sources: %v, source %q, want systemd's password", err, c.Source)
	}
	// $CREDENTIALS_DIRECTORY is where systemd says it is.
	opts.CredentialsDir = ""
	t.Setenv("CREDENTIALS_DIRECTORY", credDir)
	if c, err := Load(context.Background(), opts); err != nil || c.Source != SourceSystemd {
		t.Fatalf("via $CREDENTIALS_DIRECTORY: %v, source %q", err, c.Source)
	}
	// A present but broken systemd credential is an error, not a silent
	// fall back to an older password in the file.
	os.Remove(filepath.Join(credDir, SystemdCredentialName))
	os.Mkdir(filepath.Join(credDir, SystemdCredentialName), 0o700)
	if _, err := Load(context.Background(), opts); !errors.Is(err, ErrUnreadable) {
		t.Fatalf("broken systemd credential: %v, want ErrUnreadable", err)
	}
	if st := Status(opts); st.Present || st.Source != SourceSystemd {
		t.Errorf("Status with a broken systemd credential = %+v", st)
	}
}

func TestPasswordFuncReadsTheLatestPassword(t *testing.T) {
	opts := testOpts(t)
	get := Password(opts)
	if _, err := get(); !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("before Store: %v, want ErrNoCredentials", err)
	}
	for _, pw := range []string{"first", "second"} {
		if err := Store(context.Background(), opts, "", pw); err != nil {
			t.Fatal(err)
		}
		if got, err := get(); err != nil || got != pw {
			t.Fatalf("after storing %q: %q, %v", pw, got, err)
		}
	}
}

func TestStatusNeverContainsThePassword(t *testing.T) {
	opts := testOpts(t)
	check := func(label string) {
		t.Helper()
		st := Status(opts)
		b, _ := json.Marshal(st)
		assertNoLeak(t, label+" json", string(b))
		assertNoLeak(t, label+" fmt", fmt.Sprintf("%+v %#v", st, st))
	}
	if err := Store(context.Background(), opts, "", planted); err != nil {
		t.Fatal(err)
	}
	if st := Status(opts); !st.Present || st.Problem != "" || st.Source != SourceFile {
		t.Errorf("Status = %+v, want present from the file", st)
	}
	check("good file")
	os.Chmod(opts.File, 0o644)
	check("loose file")
	writeRaw(t, opts.File, planted+"\n"+planted+"\n", 0o600)
	check("malformed file")
}

func TestStoreValidatesBeforeWriting(t *testing.T) {
	opts := testOpts(t)
	for _, pw := range []string{"", "two\nlines", "cr\rin", "nul\x00", strings.Repeat("x", maxPasswordLen+1)} {
		if err := Store(context.Background(), opts, "", pw); err == nil {
			t.Errorf("Store accepted password %q", pw)
		} else if pw != "" && strings.Contains(err.Error(), pw) {
			t.Errorf("error quotes the password: %v", err)
		}
	}
	for _, u := range []string{"no-at-sign", "a b@example.com", "tab\t@x", "nl\n@x"} {
		if err := Store(context.Background(), opts, u, "fine"); err == nil {
			t.Errorf("Store accepted username %q", u)
		}
	}
	if _, err := os.Stat(opts.File); err == nil {
		t.Error("a rejected Store wrote the file")
	}
}

func TestClear(t *testing.T) {
	opts := testOpts(t)
	if removed, err := Clear(context.Background(), opts); removed || err != nil {
		t.Fatalf("Clear without a file: %v, %v", removed, err)
	}
	Store(context.Background(), opts, "", "pw")
	if removed, err := Clear(context.Background(), opts); !removed || err != nil {
		t.Fatalf("Clear: %v, %v", removed, err)
	}
	if _, err := Load(context.Background(), opts); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("Load after Clear: %v", err)
	}
}
