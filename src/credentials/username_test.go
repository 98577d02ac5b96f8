package credentials

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"surflare-watchdog/src/config"
)

// A config file as a person writes it: comments, odd spacing, double
// quotes, unquoted values — none of it canonical uci.
const handWritten = `# Surflare watchdog — edited by hand
config surflare "main"
  option mode   rule   # rule or global
	option node Dallas
	list candidate 'Los Angeles'

# authentication
config auth auth
	option login_mode pty
`

func writeConfig(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "surflare")
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, mode)
	return path
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// daemonUsername is what the daemon's own config parser sees.
func daemonUsername(t *testing.T, path string) string {
	t.Helper()
	c, _, err := config.Load(path)
	if err != nil {
		t.Fatalf("the daemon cannot load the edited file: %v\n%s", err, readString(t, path))
	}
	return c.Main.Username
}

func TestSetUsernameKeepsEveryOtherByte(t *testing.T) {
	path := writeConfig(t, handWritten, 0o640)
	changed, err := SetUsername(path, "me@example.com")
	if err != nil || !changed {
		t.Fatalf("SetUsername: %v, changed %v", err, changed)
	}
	want := strings.Replace(handWritten, "\tlist candidate 'Los Angeles'\n",
		"\tlist candidate 'Los Angeles'\n\toption username 'me@example.com'\n", 1)
	if got := readString(t, path); got != want {
		t.Fatalf("file after insert:\n%s\nwant:\n%s", got, want)
	}
	if u := daemonUsername(t, path); u != "me@example.com" {
		t.Errorf("daemon sees username %q", u)
	}

	// Changing it again replaces that one line, quoting included.
	if _, err := SetUsername(path, "o'brien@example.com"); err != nil {
		t.Fatal(err)
	}
	want = strings.Replace(want, "'me@example.com'", `'o'\''brien@example.com'`, 1)
	if got := readString(t, path); got != want {
		t.Fatalf("file after replace:\n%s\nwant:\n%s", got, want)
	}
	if u := daemonUsername(t, path); u != "o'brien@example.com" {
		t.Errorf("daemon sees username %q", u)
	}
	if u, err := ReadUsername(path); err != nil || u != "o'brien@example.com" {
		t.Errorf("ReadUsername = %q, %v", u, err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %04o after edit, want the original 0640", fi.Mode().Perm())
	}
	if names := dirNames(t, filepath.Dir(path)); len(names) != 1 {
		t.Errorf("directory holds %v, want just the config", names)
	}
}

func TestSetUsernameReplacesAnExistingLineInPlace(t *testing.T) {
	orig := "config surflare 'main'\n    option username \"old@example.com\"   \n\toption node 'Dallas' # a comment\n"
	path := writeConfig(t, orig, 0o644)
	if _, err := SetUsername(path, "new@example.com"); err != nil {
		t.Fatal(err)
	}
	want := "config surflare 'main'\n    option username 'new@example.com'   \n\toption node 'Dallas' # a comment\n"
	if got := readString(t, path); got != want {
		t.Fatalf("got:\n%q\nwant:\n%q", got, want)
	}
	// A comment after the option survives too.
	path = writeConfig(t, "config surflare 'main'\n\toption username old@x.y\t# the account\r\n", 0o644)
	if _, err := SetUsername(path, "new@x.y"); err != nil {
		t.Fatal(err)
	}
	if got, want := readString(t, path), "config surflare 'main'\n\toption username 'new@x.y'\t# the account\r\n"; got != want {
		t.Fatalf("got:\n%q\nwant:\n%q", got, want)
	}
}

func TestSetUsernameUnchangedValueLeavesTheFileAlone(t *testing.T) {
	path := writeConfig(t, "config surflare 'main'\n\toption username 'a@b.c'\n", 0o644)
	var before syscall.Stat_t
	syscall.Stat(path, &before)
	changed, err := SetUsername(path, "a@b.c")
	if err != nil || changed {
		t.Fatalf("SetUsername with the same value: changed %v, %v", changed, err)
	}
	var after syscall.Stat_t
	syscall.Stat(path, &after)
	if before.Ino != after.Ino {
		t.Error("the file was rewritten although nothing changed")
	}
}

func TestSetUsernameAddsTheMainSectionOrTheFile(t *testing.T) {
	t.Run("no main section", func(t *testing.T) {
		orig := "# only auth\nconfig auth 'auth'\n\toption login_mode 'argv'"
		path := writeConfig(t, orig, 0o644)
		if _, err := SetUsername(path, "x@y.z"); err != nil {
			t.Fatal(err)
		}
		got := readString(t, path)
		if !strings.HasPrefix(got, orig+"\n") {
			t.Errorf("the original text changed:\n%s", got)
		}
		if u := daemonUsername(t, path); u != "x@y.z" {
			t.Errorf("daemon sees %q", u)
		}
	})
	t.Run("no file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "surflare")
		if _, err := SetUsername(path, "x@y.z"); err != nil {
			t.Fatal(err)
		}
		if u := daemonUsername(t, path); u != "x@y.z" {
			t.Errorf("daemon sees %q", u)
		}
	})
}

// A layout a one-line edit cannot handle (the option shares its line with
// another statement) is written in uci's canonical form: still correct.
func TestSetUsernameFallsBackToCanonicalForm(t *testing.T) {
	path := writeConfig(t, "config surflare 'main'\n\toption node 'Dallas'; option username 'old@x.y'\n", 0o644)
	if _, err := SetUsername(path, "new@x.y"); err != nil {
		t.Fatal(err)
	}
	if u := daemonUsername(t, path); u != "new@x.y" {
		t.Errorf("daemon sees %q\n%s", u, readString(t, path))
	}
	c, _, _ := config.Load(path)
	if c.Main.Node != "Dallas" {
		t.Errorf("node lost in the rewrite: %q", c.Main.Node)
	}
}

func TestSetUsernameRefusesABrokenFile(t *testing.T) {
	orig := "config surflare 'main'\n\toption node 'unterminated\n"
	path := writeConfig(t, orig, 0o644)
	if _, err := SetUsername(path, "a@b.c"); err == nil {
		t.Fatal("SetUsername edited a file with a syntax error")
	}
	if got := readString(t, path); got != orig {
		t.Errorf("a broken file was modified:\n%s", got)
	}
}

func TestStoreSetsUsernameAndPassword(t *testing.T) {
	opts := testOpts(t)
	os.WriteFile(opts.ConfigFile, []byte(handWritten), 0o644)
	if err := Store(t.Context(), opts, "lab@example.com", planted); err != nil {
		t.Fatal(err)
	}
	if u := daemonUsername(t, opts.ConfigFile); u != "lab@example.com" {
		t.Errorf("username %q", u)
	}
	assertNoLeak(t, "config file", readString(t, opts.ConfigFile))
	opts.Username = "lab@example.com"
	if c, err := Load(t.Context(), opts); err != nil || c.Password.Reveal() != planted {
		t.Fatalf("Load: %v", err)
	}
}
