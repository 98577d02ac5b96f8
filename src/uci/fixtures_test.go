package uci

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"surflare-watchdog/src/testenv"
	"testing"
)

func fixturesDir(t testing.TB) string { return testenv.Fixtures(t, "uci") }

func glob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) == 0 {
		t.Fatalf("no fixtures match %s", pattern)
	}
	return m
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// env is a config dir and a save dir, like the fixtures' DIR and SAVEDIR.
type env struct {
	conf, save string
	cli        *CLI
}

func newEnv(t *testing.T) *env {
	tmp := t.TempDir()
	e := &env{conf: filepath.Join(tmp, "config"), save: filepath.Join(tmp, "save")}
	if err := os.Mkdir(e.conf, 0o755); err != nil {
		t.Fatal(err)
	}
	// The real uci also reads /tmp/.uci and /var/run/uci; point those
	// defaults into the temp dir so the test sees nothing from the host.
	e.cli = &CLI{SaveDir: filepath.Join(tmp, "default-save"), Conf2Dir: filepath.Join(tmp, "conf2")}
	return e
}

func (e *env) install(t *testing.T, src, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.conf, name), readFile(t, src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// uci runs the CLI as `uci -c DIR -t SAVEDIR args...`.
func (e *env) uci(args ...string) (stdout, stderr string, code int) {
	var o, er bytes.Buffer
	full := append([]string{"-c", e.conf, "-t", e.save}, args...)
	code = e.cli.Run(full, &o, &er)
	return o.String(), er.String(), code
}

func fixtureName(path string) string {
	base := filepath.Base(path)
	return base[:strings.IndexByte(base, '.')]
}

// TestReadFixtures checks export, show and -X show of every valid input.
func TestReadFixtures(t *testing.T) {
	fx := fixturesDir(t)
	for _, conf := range glob(t, filepath.Join(fx, "t*.conf")) {
		name := fixtureName(conf)
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.install(t, conf, name)
			for _, c := range []struct {
				ext  string
				args []string
			}{
				{".export", []string{"export", name}},
				{".show", []string{"show", name}},
				{".showX", []string{"-X", "show", name}},
			} {
				want := readFile(t, filepath.Join(fx, name+c.ext))
				out, errOut, code := e.uci(c.args...)
				if code != 0 || errOut != "" {
					t.Errorf("uci %v: exit %d, stderr %q", c.args, code, errOut)
				}
				if out != string(want) {
					t.Errorf("uci %v:\n got %q\nwant %q", c.args, out, want)
				}
			}
		})
	}
}

// TestParseAPI checks the library view of the same inputs: Parse then
// Export gives the export fixture, and line numbers point at statements.
func TestParseAPI(t *testing.T) {
	fx := fixturesDir(t)
	for _, conf := range glob(t, filepath.Join(fx, "t*.conf")) {
		name := fixtureName(conf)
		c, err := Parse(name, readFile(t, conf))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var b bytes.Buffer
		if err := Export(&b, c, ExportOptions{Header: true}); err != nil {
			t.Fatal(err)
		}
		if want := readFile(t, filepath.Join(fx, name+".export")); !bytes.Equal(b.Bytes(), want) {
			t.Errorf("%s: Export:\n got %q\nwant %q", name, b.Bytes(), want)
		}
	}
	c, err := Parse("t10", readFile(t, filepath.Join(fx, "t10_duplicates.conf")))
	if err != nil {
		t.Fatal(err)
	}
	dup := c.Section("dup")
	if dup == nil || dup.Line != 1 || dup.Option("b").Line != 9 || dup.Option("b").Values[0] != "override" {
		t.Errorf("merged section dup: %+v", dup)
	}
	if anon := c.Section("@host[-1]"); anon == nil || anon.Name != "cfg03fe63" || !anon.Anonymous || anon.Line != 12 {
		t.Errorf("@host[-1] = %+v, want anonymous cfg03fe63 at line 12", anon)
	}
	if got := len(c.SectionsOfType("host")); got != 3 {
		t.Errorf("SectionsOfType(host) = %d sections, want 3", got)
	}
	if c.Section("nosuch") != nil || dup.Option("nosuch") != nil {
		t.Error("lookup of a missing name returned something")
	}
}

// errorBlock is one command recorded in an .error fixture.
type errorBlock struct {
	args           []string
	exit           int
	stderr, stdout string
}

var errorHeader = regexp.MustCompile(`^# uci (.*?)(\s+\(non-strict mode\))?$`)

func parseErrorFixture(t *testing.T, data string) []errorBlock {
	var blocks []errorBlock
	var cur *errorBlock
	section := ""
	for _, line := range strings.SplitAfter(data, "\n") {
		if line == "" {
			continue
		}
		if m := errorHeader.FindStringSubmatch(strings.TrimSuffix(line, "\n")); m != nil {
			blocks = append(blocks, errorBlock{args: strings.Fields(m[1])})
			cur = &blocks[len(blocks)-1]
			section = ""
			continue
		}
		switch {
		case cur == nil:
			t.Fatalf("text before the first command: %q", line)
		case section == "" && strings.HasPrefix(line, "exit="):
			n, err := strconv.Atoi(strings.TrimSpace(line[5:]))
			if err != nil {
				t.Fatal(err)
			}
			cur.exit = n
		case section == "" && line == "stderr:\n", section == "stderr" && line == "stdout:\n":
			section = strings.TrimSuffix(line, ":\n")
		case section == "stderr":
			cur.stderr += line
		case section == "stdout":
			cur.stdout += line
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	return blocks
}

// TestErrorFixtures runs each recorded command on the broken inputs:
// strict export/show and non-strict export.
func TestErrorFixtures(t *testing.T) {
	fx := fixturesDir(t)
	for _, conf := range glob(t, filepath.Join(fx, "e*.conf")) {
		name := fixtureName(conf)
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.install(t, conf, name)
			blocks := parseErrorFixture(t, string(readFile(t, filepath.Join(fx, name+".error"))))
			if len(blocks) < 3 {
				t.Fatalf("only %d commands in the fixture", len(blocks))
			}
			for _, b := range blocks {
				var args []string
				for i := 0; i < len(b.args); i++ {
					if b.args[i] == "-c" && i+1 < len(b.args) && b.args[i+1] == "DIR" {
						i++
						continue
					}
					args = append(args, b.args[i])
				}
				out, errOut, code := e.uci(args...)
				if code != b.exit || errOut != b.stderr || out != b.stdout {
					t.Errorf("uci %v:\n got exit %d stderr %q stdout %q\nwant exit %d stderr %q stdout %q",
						args, code, errOut, out, b.exit, b.stderr, b.stdout)
				}
			}
			// The library reports the same first error.
			_, err := Parse(name, readFile(t, conf))
			pe, ok := err.(*ParseError)
			if !ok || !strings.Contains(blocks[0].stderr, pe.Error()) {
				t.Errorf("Parse: %v, want the error in %q", err, blocks[0].stderr)
			}
		})
	}
}

var exitLine = regexp.MustCompile(`^\[exit (\d+)\]$`)

// transcript is a list of commands with their output and exit status.
type transcriptEntry struct {
	line   string
	output string
	exit   int
}

func parseTranscript(t *testing.T, data string) (entries []transcriptEntry, tail string) {
	var cur *transcriptEntry
	lines := strings.SplitAfter(data, "\n")
	for i, line := range lines {
		switch {
		case strings.HasPrefix(line, "$ uci ") && cur == nil:
			entries = append(entries, transcriptEntry{line: strings.TrimSuffix(line[len("$ uci "):], "\n")})
			cur = &entries[len(entries)-1]
		case cur != nil && exitLine.MatchString(strings.TrimSuffix(line, "\n")):
			cur.exit, _ = strconv.Atoi(exitLine.FindStringSubmatch(strings.TrimSuffix(line, "\n"))[1])
			cur = nil
		case cur != nil:
			cur.output += line
		default:
			return entries, strings.Join(lines[i:], "")
		}
	}
	if cur != nil {
		t.Fatalf("transcript ends inside %q", cur.line)
	}
	return entries, ""
}

// TestMiscReadCommands replays misc_read_commands.txt (stdout and stderr
// together, as the transcript shows them).
func TestMiscReadCommands(t *testing.T) {
	fx := fixturesDir(t)
	e := newEnv(t)
	for _, conf := range glob(t, filepath.Join(fx, "t*.conf")) {
		e.install(t, conf, fixtureName(conf))
	}
	entries, tail := parseTranscript(t, string(readFile(t, filepath.Join(fx, "misc_read_commands.txt"))))
	if len(entries) < 20 || strings.TrimSpace(tail) != "" {
		t.Fatalf("read %d commands, unparsed tail %q", len(entries), tail)
	}
	for _, c := range entries {
		out, errOut, code := e.uci(strings.Fields(c.line)...)
		if out+errOut != c.output || code != c.exit {
			t.Errorf("uci %s:\n got exit %d %q\nwant exit %d %q", c.line, code, out+errOut, c.exit, c.output)
		}
	}
}

// TestRoundTrips applies each rt*.commands file and compares every output,
// the pending changes, the delta file and the committed file.
func TestRoundTrips(t *testing.T) {
	fx := fixturesDir(t)
	for _, cmds := range glob(t, filepath.Join(fx, "rt*.commands")) {
		name := fixtureName(cmds)
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.install(t, filepath.Join(fx, name+".conf"), name)
			log, tail := parseTranscript(t, string(readFile(t, filepath.Join(fx, name+".commands.log"))))
			var lines []string
			for _, l := range strings.Split(strings.TrimRight(string(readFile(t, cmds)), "\n"), "\n") {
				lines = append(lines, l)
			}
			if len(log) != len(lines) {
				t.Fatalf("%d commands but %d log entries", len(lines), len(log))
			}
			for i, line := range lines {
				if log[i].line != line {
					t.Fatalf("log entry %d is %q, command is %q", i, log[i].line, line)
				}
				args, err := shellWords(line)
				if err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				out, errOut, code := e.uci(args...)
				if out+errOut != log[i].output || code != log[i].exit {
					t.Errorf("uci %s:\n got exit %d %q\nwant exit %d %q", line, code, out+errOut, log[i].exit, log[i].output)
				}
			}
			out, _, _ := e.uci("changes", name)
			if want := string(readFile(t, filepath.Join(fx, name+".changes"))); out != want {
				t.Errorf("changes:\n got %q\nwant %q", out, want)
			}
			if got, want := readFile(t, filepath.Join(e.save, name)), readFile(t, filepath.Join(fx, name+".delta")); !bytes.Equal(got, want) {
				t.Errorf("delta file:\n got %q\nwant %q", got, want)
			}
			_, errOut, code := e.uci("commit", name)
			if got := fmt.Sprintf("commit exit=%d\n", code) + errOut; got != tail {
				t.Errorf("commit: got %q, want %q", got, tail)
			}
			if got, want := readFile(t, filepath.Join(e.conf, name)), readFile(t, filepath.Join(fx, name+".after.conf")); !bytes.Equal(got, want) {
				t.Errorf("committed file:\n got %q\nwant %q", got, want)
			}
			if got := readFile(t, filepath.Join(e.save, name)); len(got) != 0 {
				t.Errorf("delta file after commit: %q, want empty", got)
			}
			out, _, _ = e.uci("show", name)
			if want := string(readFile(t, filepath.Join(fx, name+".after.show"))); out != want {
				t.Errorf("show after commit:\n got %q\nwant %q", out, want)
			}
		})
	}
}
