package uci

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestStoreEditCommit uses the library API the way the daemon's tooling
// would: load, edit, save (delta file), reload sees the change, commit.
func TestStoreEditCommit(t *testing.T) {
	tmp := t.TempDir()
	st := &Store{ConfDir: filepath.Join(tmp, "etc"), SaveDir: filepath.Join(tmp, "save")}
	if err := os.Mkdir(st.ConfDir, 0o755); err != nil {
		t.Fatal(err)
	}
	orig := "config surflare 'main'\n\toption mode 'rule'\n\tlist candidate 'Dallas'\n\nconfig probe\n\toption url 'http://198.18.0.1/'\n"
	if err := os.WriteFile(filepath.Join(st.ConfDir, "surflare"), []byte(orig), 0o640); err != nil {
		t.Fatal(err)
	}
	p, err := st.Load("surflare")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct{ op, addr string }{
		{"set", "surflare.main.mode=global"},
		{"add_list", "surflare.main.candidate=Chicago"},
		{"set", "surflare.@probe[0].kind=ip-echo"},
	} {
		if err := p.Edit(e.op, e.addr); err != nil {
			t.Fatalf("%s %s: %v", e.op, e.addr, err)
		}
	}
	// The real uci names the third section of a package, of type bypass,
	// cfg033db7.
	if name := p.AddSection("bypass"); name != "cfg033db7" {
		t.Errorf("AddSection gave %q, want cfg033db7", name)
	}
	if err := p.Edit("delete", "surflare.nosuch"); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete of a missing section: %v, want ErrNotFound", err)
	}
	if err := st.Save(p); err != nil {
		t.Fatal(err)
	}
	// The config file is untouched until commit; a fresh load sees the
	// saved changes.
	if b, _ := os.ReadFile(filepath.Join(st.ConfDir, "surflare")); string(b) != orig {
		t.Errorf("config file changed before commit: %q", b)
	}
	p2, err := st.Load("surflare")
	if err != nil {
		t.Fatal(err)
	}
	if got := p2.Section("main").Option("candidate").Values; !reflect.DeepEqual(got, []string{"Dallas", "Chicago"}) {
		t.Errorf("candidate after reload = %q", got)
	}
	if len(p2.Saved) != 4 {
		t.Errorf("Saved has %d changes, want 4", len(p2.Saved))
	}
	if err := st.Commit(p2); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(st.ConfDir, "surflare"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("surflare", b)
	if err != nil {
		t.Fatalf("committed file does not parse: %v\n%s", err, b)
	}
	if v, _ := c.Section("main").Get("mode"); v != "global" {
		t.Errorf("mode after commit = %q", v)
	}
	if v, _ := c.Section("@probe[0]").Get("kind"); v != "ip-echo" {
		t.Errorf("probe kind after commit = %q", v)
	}
	if len(c.SectionsOfType("bypass")) != 1 {
		t.Error("added bypass section missing after commit")
	}
	if fi, err := os.Stat(filepath.Join(st.ConfDir, "surflare")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("commit changed the file mode: %v %v", fi.Mode(), err)
	}
	if d, _ := os.ReadFile(filepath.Join(st.SaveDir, "surflare")); len(d) != 0 {
		t.Errorf("delta file not emptied by commit: %q", d)
	}
}

// TestStoreRevert drops one section's pending change and keeps the rest.
func TestStoreRevert(t *testing.T) {
	tmp := t.TempDir()
	st := &Store{ConfDir: tmp, SaveDir: filepath.Join(tmp, "save")}
	os.WriteFile(filepath.Join(tmp, "x"), []byte("config a 'one'\nconfig a 'two'\n"), 0o644)
	p, err := st.Load("x")
	if err != nil {
		t.Fatal(err)
	}
	p.Edit("set", "x.one.v=1")
	p.Edit("set", "x.two.v=2")
	if err := st.Save(p); err != nil {
		t.Fatal(err)
	}
	p, err = st.Revert(p, "one", "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Section("one").Option("v") != nil || p.Section("two").Option("v") == nil {
		t.Errorf("after revert of one: one.v=%v two.v=%v", p.Section("one").Option("v"), p.Section("two").Option("v"))
	}
	if d, _ := os.ReadFile(filepath.Join(st.SaveDir, "x")); string(d) != "x.two.v='2'\n" {
		t.Errorf("delta file after revert: %q", d)
	}
}

// TestParseNonStrict collects every error and keeps what parsed.
func TestParseNonStrict(t *testing.T) {
	c, errs := ParseNonStrict("n", []byte("config a 'x'\n\tbogus\n\toption ok '1'\n\toption bad-name '2'\n"))
	if len(errs) != 2 || errs[0].Line != 2 || errs[1].Line != 4 || errs[0].File != "n" {
		t.Fatalf("errors = %v", errs)
	}
	if v, ok := c.Section("x").Get("ok"); !ok || v != "1" {
		t.Errorf("option after an error lost: %q %v", v, ok)
	}
}
