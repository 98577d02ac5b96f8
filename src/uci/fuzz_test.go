package uci

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that no input makes the parsers panic, and that for any
// input uci accepts, parse -> export -> parse gives the same tree.
//
// One real-uci limitation is excluded: export writes section types
// unquoted, so a type holding a character the tokenizer treats specially
// (quote, backslash, '#', ';') does not read back the same in the real
// tool either.
func FuzzParse(f *testing.F) {
	f.Add([]byte("config a 'b'\n\toption c 'd'\n\tlist e 'f'\n"))
	f.Add([]byte("config x\n\toption v \"a\\\"b\" # c\nconfig x;option w 'multi\nline'\n"))
	if fx, err := findFixtures(); err == nil {
		paths, _ := filepath.Glob(filepath.Join(fx, "*.conf"))
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ParseNonStrict("fuzz", data)
		parseDeltaLines(data)
		c, err := Parse("fuzz", data)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("Parse returned %T, want *ParseError", err)
			}
			return
		}
		for _, s := range c.Sections {
			if strings.ContainsAny(s.Type, "'\"\\#;") {
				return
			}
		}
		var out bytes.Buffer
		if err := Export(&out, c, ExportOptions{Header: true}); err != nil {
			t.Fatal(err)
		}
		c2, err := Parse("fuzz", out.Bytes())
		if err != nil {
			t.Fatalf("re-parse of export failed: %v\nexport:\n%q", err, out.Bytes())
		}
		if a, b := treeString(c), treeString(c2); a != b {
			t.Fatalf("tree changed on round trip:\nfirst:  %s\nsecond: %s\nexport: %q", a, b, out.Bytes())
		}
	})
}

// treeString renders what a config means (not where it came from).
func treeString(c *Config) string {
	var sb strings.Builder
	for _, s := range c.Sections {
		fmt.Fprintf(&sb, "[%q %q anon=%v", s.Name, s.Type, s.Anonymous)
		for _, o := range s.Options {
			fmt.Fprintf(&sb, " %q list=%v %q", o.Name, o.List, o.Values)
		}
		sb.WriteString("]")
	}
	return sb.String()
}

// findFixtures is fixturesDir for contexts without a *testing.T.
func findFixtures() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			fx := filepath.Join(dir, "..", "shared", "fixtures", "uci")
			_, err := os.Stat(fx)
			return fx, err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// FuzzBatch feeds any input to `uci batch` and `uci import` on a small
// config: neither may panic, a batch always exits 0 (uci reports each
// failed command and goes on), and an import exits 0 or 1.
func FuzzBatch(f *testing.F) {
	for _, c := range batchCases {
		f.Add([]byte(c.stdin + c.file))
	}
	f.Add([]byte("set p.s1.x='a b'; show p\nimport p\nconfig t 'n'\n\toption x 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tmp := t.TempDir()
		conf := filepath.Join(tmp, "c")
		if err := os.Mkdir(conf, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(conf, "p"), []byte(batchBase), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"batch"}, {"-S", "batch"}, {"import", "p"}, {"-m", "import", "p"}, {"import"}} {
			cli := &CLI{SaveDir: filepath.Join(tmp, "s"), Conf2Dir: filepath.Join(tmp, "none"), Stdin: bytes.NewReader(data)}
			var o, e bytes.Buffer
			code := cli.Run(append([]string{"-c", conf, "-t", filepath.Join(tmp, "s")}, args...), &o, &e)
			if args[len(args)-1] == "batch" && code != 0 || code != 0 && code != 1 {
				t.Fatalf("uci %q exited %d\nstderr: %s", args, code, e.String())
			}
		}
	})
}
