package uci

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// batchCase is one uci invocation on a fresh directory: config files in
// DIR/c, delta files in DIR/s, an input file DIR/in; "DIR" in args is
// replaced by the directory as the program under test sees it.
type batchCase struct {
	name  string
	conf  map[string]string // config dir: file name -> content
	delta string            // DIR/s/p, when not ""
	stdin string
	file  string // DIR/in, when not ""
	args  []string
	want  string // transcript (see runCase); "" for generated cases
}

// uciRunner runs a uci: ours (the zero value), a real binary on this host
// (bin), or the real one inside an OpenWrt root through chroot (root).
type uciRunner struct{ bin, root string }

// tempDir makes a directory for one run and returns it as this host sees
// it and as the uci under test sees it (inside root).
func (u uciRunner) tempDir(t *testing.T) (host, seen string) {
	t.Helper()
	if u.root == "" {
		d := t.TempDir()
		return d, d
	}
	d, err := os.MkdirTemp(filepath.Join(u.root, "tmp"), "surfuci")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d, "/tmp/" + filepath.Base(d)
}

// runReal runs the real uci as `uci args...` and returns its exit status.
func (u uciRunner) runReal(t *testing.T, args []string, stdin string, stdout, stderr io.Writer) int {
	t.Helper()
	var cmd *exec.Cmd
	if u.root != "" {
		cmd = exec.Command("chroot", append([]string{u.root, "uci"}, args...)...)
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	} else {
		cmd = exec.Command(u.bin, args...)
		cmd.Args[0] = "uci"
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), stdout, stderr
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("running the real uci: %v", err)
		}
		return ee.ExitCode()
	}
	return 0
}

// runCase runs c and returns everything a user could observe: stdout,
// stderr, exit status, and each file left in the config and save dirs
// with its mode.
func (u uciRunner) runCase(t *testing.T, c batchCase) string {
	t.Helper()
	host, seen := u.tempDir(t)
	mustMkdir(t, filepath.Join(host, "c"))
	for n, data := range c.conf {
		mustWrite(t, filepath.Join(host, "c", n), data, 0o644)
	}
	if c.delta != "" {
		mustMkdir(t, filepath.Join(host, "s"))
		mustWrite(t, filepath.Join(host, "s", "p"), c.delta, 0o600)
	}
	if c.file != "" {
		mustWrite(t, filepath.Join(host, "in"), c.file, 0o644)
	}
	args := []string{"-c", seen + "/c", "-t", seen + "/s"}
	for _, a := range c.args {
		args = append(args, strings.ReplaceAll(a, "DIR", seen))
	}
	var o, e bytes.Buffer
	code := 0
	if u.bin == "" && u.root == "" {
		cli := &CLI{SaveDir: filepath.Join(host, "default-save"), Conf2Dir: filepath.Join(host, "conf2"), Stdin: strings.NewReader(c.stdin)}
		code = cli.Run(args, &o, &e)
	} else {
		code = u.runReal(t, args, c.stdin, &o, &e)
	}
	var tr strings.Builder
	fmt.Fprintf(&tr, "stdout:\n%sstderr:\n%sexit %d\n", o.String(), strings.ReplaceAll(e.String(), seen, "DIR"), code)
	for _, dir := range []string{"c", "s"} {
		ents, _ := os.ReadDir(filepath.Join(host, dir))
		var names []string
		for _, en := range ents {
			names = append(names, en.Name())
		}
		sort.Strings(names)
		for _, n := range names {
			path := filepath.Join(host, dir, n)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(path)
			fmt.Fprintf(&tr, "%s/%s %o:\n%s", dir, n, fi.Mode().Perm(), data)
		}
	}
	return tr.String()
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

const batchBase = "config t 's1'\n\toption o1 'v'\n"

// batchCases are what OpenWrt's scripts and users feed uci batch and uci
// import, edge cases included. Each want is the real uci's transcript
// (TestBatchImportAgainstRealUCI checks that it still is).
var batchCases = []batchCase{
	{
		name:  "batch: comments, blank lines and an unknown command mid-batch",
		conf:  map[string]string{"p": batchBase},
		stdin: "set p.s1.o2=x\n\n# comment\n  set p.s1.o3='a b' # trailing\nbogus\nget p.s1.o1\nshow p\n",
		args:  []string{"batch"},
		want:  "stdout:\nv\np.s1=t\np.s1.o1='v'\np.s1.o2='x'\np.s1.o3='a b'\nstderr:\nUnknown command\nexit 0\nc/p 644:\nconfig t 's1'\n\toption o1 'v'\ns/p 644:\np.s1.o2='x'\np.s1.o3='a b'\n",
	},
	{
		name:  "batch: an unterminated quote at the end counts lines from the last load",
		conf:  map[string]string{"p": batchBase},
		stdin: "set p.s1.o2=x\nshow p.s1.o2\nset p.s1.o4='unterminated\n",
		args:  []string{"batch"},
		want:  "stdout:\np.s1.o2='x'\nstderr:\nuci: Parse error (EOF with unterminated ') at line 1, byte 26\nexit 0\nc/p 644:\nconfig t 's1'\n\toption o1 'v'\ns/p 644:\np.s1.o2='x'\n",
	},
	{
		name:  "batch: ';' ends the command and drops the rest of the line; commit; exit stops",
		conf:  map[string]string{"p": batchBase},
		stdin: "set p.s1.a=1; set p.s1.b=2\nadd_list p.s1.l=x\nadd_list p.s1.l=\"y z\"\ncommit p\nchanges\nexit\nset p.s1.c=3\n",
		args:  []string{"batch"},
		want:  "stdout:\nstderr:\nexit 0\nc/p 644:\n\nconfig t 's1'\n\toption o1 'v'\n\toption a '1'\n\tlist l 'x'\n\tlist l 'y z'\n\ns/p 644:\n",
	},
	{
		name:  "batch: four words are too many; wrong counts, nested batch and help",
		conf:  map[string]string{"p": batchBase},
		stdin: "add p t extra\nget\nbatch\nEXIT\nshow\n",
		args:  []string{"-q", "batch"},
		want:  "stdout:\nstderr:\nexit 0\nc/p 644:\nconfig t 's1'\n\toption o1 'v'\n",
	},
	{
		name: "batch: -f file, quoted values over two lines",
		conf: map[string]string{"p": batchBase},
		file: "set p.s1.m=\"line1\nline2\"\nset p.s1.n='it'\\''s'\nexport p\n",
		args: []string{"-f", "DIR/in", "batch"},
		want: "stdout:\npackage p\n\nconfig t 's1'\n\toption o1 'v'\n\toption m 'line1\nline2'\n\toption n 'it'\\''s'\n\nstderr:\nexit 0\nc/p 644:\nconfig t 's1'\n\toption o1 'v'\ns/p 644:\np.s1.m='line1\nline2'\np.s1.n='it'\\''s'\n",
	},
	{
		name:  "batch: import reads the rest of the input",
		conf:  map[string]string{"p": batchBase},
		stdin: "set p.s1.x=1\nimport p\nconfig t 'n'\n\toption x 1\n",
		args:  []string{"batch"},
		want:  "stdout:\nstderr:\nexit 0\nc/p 644:\n\nconfig t 'n'\n\toption x '1'\n\ns/p 644:\np.s1.x='1'\n",
	},
	{
		name:  "batch: an import's parse error stops it and the batch goes on, counting lines on",
		conf:  map[string]string{"p": batchBase},
		stdin: "import p\nconfig t 'n'\nset p.n.x=1\nset p.s1.x='a\n",
		args:  []string{"batch"},
		want:  "stdout:\nstderr:\nuci: Parse error (invalid command) at line 2, byte 0\nuci: Parse error (EOF with unterminated ') at line 3, byte 14\nexit 0\nc/p 644:\nconfig t 's1'\n\toption o1 'v'\n",
	},
	{
		name:  "import: package statements, each committed",
		conf:  map[string]string{"p": batchBase},
		stdin: "package p\nconfig t 'x'\n\toption a 'b'\npackage q\nconfig u\n\tlist l 1\n",
		args:  []string{"import"},
		want:  "stdout:\nstderr:\nexit 0\nc/p 644:\n\nconfig t 'x'\n\toption a 'b'\n\nc/q 600:\n\nconfig u\n\tlist l '1'\n\n",
	},
	{
		name:  "import: without a name and without a package statement",
		conf:  map[string]string{"p": batchBase},
		stdin: "config t 'x'\n",
		args:  []string{"import"},
		want:  "stdout:\nstderr:\nuci: Parse error (attempting to import a file without a package name) at line 1, byte 0\nexit 1\nc/p 644:\nconfig t 's1'\n\toption o1 'v'\n",
	},
	{
		name:  "import: a duplicate package stops even a non-strict import",
		conf:  map[string]string{"p": batchBase},
		stdin: "package a\nconfig t\npackage a\n",
		args:  []string{"-S", "import"},
		want:  "stdout:\nstderr:\nDuplicate entry\nuci: Duplicate entry\n\nexit 1\nc/p 644:\nconfig t 's1'\n\toption o1 'v'\n",
	},
	{
		name:  "import: empty input makes an empty package; pending changes stay",
		conf:  map[string]string{"p": batchBase},
		delta: "p.s1.o1='w'\n",
		args:  []string{"import", "p"},
		want:  "stdout:\nstderr:\nexit 0\nc/p 644:\n\ns/p 600:\np.s1.o1='w'\n",
	},
	{
		name:  "import: a new package, non-strict, errors printed as they come",
		conf:  map[string]string{"p": batchBase},
		stdin: "config t 'x'\nbogus\n\toption a b c\n\toption d e\n",
		args:  []string{"-S", "import", "newp"},
		want:  "stdout:\nstderr:\nParse error (invalid command) at line 2, byte 0\nexit 0\nc/newp 600:\n\nconfig t 'x'\n\toption a 'b'\n\toption d 'e'\n\nc/p 644:\nconfig t 's1'\n\toption o1 'v'\n",
	},
	{
		name:  "import -m: statements become pending changes",
		conf:  map[string]string{"p": "config t 's1'\n\toption z 1\n"},
		stdin: "config t 's1'\n\toption a 'b'\n\toption z ''\nconfig t\n\tlist l 1\n",
		args:  []string{"-m", "import", "p"},
		want:  "stdout:\nstderr:\nexit 0\nc/p 644:\nconfig t 's1'\n\toption z 1\ns/p 644:\np.s1.a='b'\n+p.cfg02b619='t'\n|p.cfg02b619.l='1'\n",
	},
	{
		name:  "import: bad names and argument counts",
		conf:  map[string]string{"p": batchBase},
		stdin: "config t\n",
		args:  []string{"import", "x y"},
		want:  "stdout:\nstderr:\nuci: Invalid argument\nexit 1\nc/p 644:\nconfig t 's1'\n\toption o1 'v'\n",
	},
	{
		name: "-f twice",
		conf: map[string]string{"p": batchBase},
		file: "show p\n",
		args: []string{"-f", "DIR/in", "-f", "DIR/in", "batch"},
		want: "stdout:\nstderr:\nToo many input files.\nexit 1\nc/p 644:\nconfig t 's1'\n\toption o1 'v'\n",
	},
}

// TestBatchImport checks batch and import against the real uci's
// transcripts.
func TestBatchImport(t *testing.T) {
	for _, c := range batchCases {
		if got := (uciRunner{}).runCase(t, c); got != c.want {
			t.Errorf("%s: uci %q\n%s", c.name, c.args, firstDiff(got, c.want))
		}
	}
}
