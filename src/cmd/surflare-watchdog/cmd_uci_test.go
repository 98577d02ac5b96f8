package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUCISubcommand drives `surflare-watchdog uci` end to end on a temp
// config dir: edit, inspect pending changes, commit, and an error path.
func TestUCISubcommand(t *testing.T) {
	tmp := t.TempDir()
	conf, save := filepath.Join(tmp, "config"), filepath.Join(tmp, "save")
	if err := os.Mkdir(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	const pkg = "surflare_cmd_uci_test"
	if err := os.WriteFile(filepath.Join(conf, pkg), []byte("config surflare 'main'\n\toption mode 'rule'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	uci := func(args ...string) (string, string, int) {
		var o, e bytes.Buffer
		code := runUCI(append([]string{"-c", conf, "-t", save}, args...), strings.NewReader(""), &o, &e)
		return o.String(), e.String(), code
	}
	steps := []struct {
		args        []string
		out, errOut string
		code        int
	}{
		{[]string{"set", pkg + ".main.mode=global"}, "", "", 0},
		{[]string{"add_list", pkg + ".main.candidate=Dallas"}, "", "", 0},
		{[]string{"get", pkg + ".main.mode"}, "global\n", "", 0},
		{[]string{"changes", pkg}, pkg + ".main.mode='global'\n" + pkg + ".main.candidate+='Dallas'\n", "", 0},
		{[]string{"commit", pkg}, "", "", 0},
		{[]string{"get", pkg + ".main.nosuch"}, "", "uci: Entry not found\n", 1},
		{[]string{"-q", "get", pkg + ".main.nosuch"}, "", "", 1},
	}
	for _, s := range steps {
		out, errOut, code := uci(s.args...)
		if out != s.out || errOut != s.errOut || code != s.code {
			t.Errorf("uci %v: got (%q, %q, %d), want (%q, %q, %d)", s.args, out, errOut, code, s.out, s.errOut, s.code)
		}
	}
	got, err := os.ReadFile(filepath.Join(conf, pkg))
	if err != nil {
		t.Fatal(err)
	}
	want := "\nconfig surflare 'main'\n\toption mode 'global'\n\tlist candidate 'Dallas'\n\n"
	if string(got) != want {
		t.Errorf("committed file %q, want %q", got, want)
	}
}

func TestUCIHelp(t *testing.T) {
	var o, e bytes.Buffer
	if code := runUCI([]string{"--help"}, strings.NewReader(""), &o, &e); code != exitOK {
		t.Errorf("--help exit %d", code)
	}
	if !strings.HasPrefix(o.String(), "Usage: uci [<options>] <command>") || e.Len() != 0 {
		t.Errorf("--help printed %q / %q", o.String(), e.String())
	}
}

// TestUCIBatchAndImport feeds `surflare-watchdog uci batch` and `import` on
// stdin, as uci-defaults scripts and LuCI do, and checks what lands on
// disk: the batch's changes are committed, an error mid-batch does not
// stop it, and import replaces a package.
func TestUCIBatchAndImport(t *testing.T) {
	tmp := t.TempDir()
	conf, save := filepath.Join(tmp, "config"), filepath.Join(tmp, "save")
	if err := os.Mkdir(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	const pkg = "surflare_cmd_uci_test"
	if err := os.WriteFile(filepath.Join(conf, pkg), []byte("config surflare 'main'\n\toption mode 'rule'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	uci := func(stdin string, args ...string) (string, string, int) {
		var o, e bytes.Buffer
		code := runUCI(append([]string{"-c", conf, "-t", save}, args...), strings.NewReader(stdin), &o, &e)
		return o.String(), e.String(), code
	}
	script := "# switch to global mode\nset " + pkg + ".main.mode=global\n\nget " + pkg + ".main.nosuch\nadd_list " + pkg + ".main.candidate='New York'\ncommit " + pkg + "\n"
	if out, errOut, code := uci(script, "batch"); out != "" || errOut != "uci: Entry not found\n" || code != 0 {
		t.Errorf("batch: got (%q, %q, %d), want the one error reported and exit 0", out, errOut, code)
	}
	got, _ := os.ReadFile(filepath.Join(conf, pkg))
	if want := "\nconfig surflare 'main'\n\toption mode 'global'\n\tlist candidate 'New York'\n\n"; string(got) != want {
		t.Errorf("after batch the file is %q, want %q", got, want)
	}
	if out, errOut, code := uci("config surflare 'main'\n\toption mode 'rule'\n", "import", pkg); out != "" || errOut != "" || code != 0 {
		t.Errorf("import: got (%q, %q, %d)", out, errOut, code)
	}
	got, _ = os.ReadFile(filepath.Join(conf, pkg))
	if want := "\nconfig surflare 'main'\n\toption mode 'rule'\n\n"; string(got) != want {
		t.Errorf("after import the file is %q, want %q", got, want)
	}
}
