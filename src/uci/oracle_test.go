package uci

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"surflare-watchdog/src/testenv"
)

// TestOracle compares this implementation with a real uci binary on
// generated inputs and commands. It needs the binary: set UCI_REAL to its
// path (build it from github.com/openwrt/uci: gcc cli.c libuci.c file.c
// util.c delta.c parse.c with an empty uci_config.h). UCI_ORACLE_N sets the
// number of cases (default 300).
//
// Without UCI_REAL it runs OpenWrt's own uci from the OpenWrt userland
// beside the repository (through chroot, so as root), on 100 cases by
// default; it skips when neither is there.
func TestOracle(t *testing.T) {
	real := uciRunner{bin: os.Getenv("UCI_REAL")}
	n := 300
	if real.bin == "" {
		real.root = testenv.OpenWrtRoot(t)
		n = 100
	}
	if s := os.Getenv("UCI_ORACLE_N"); s != "" {
		n = atoiOr(s, n)
	}
	rng := rand.New(rand.NewSource(int64(atoiOr(os.Getenv("UCI_ORACLE_SEED"), 1))))
	stats := map[string]int{}
	defer func() { t.Logf("%d cases; cases containing: %v", n, stats) }()
	for i := 0; i < n; i++ {
		input := genConfig(rng)
		cmds := genCommands(rng)
		var delta []byte
		if rng.Intn(3) == 0 {
			delta = genDelta(rng)
		}
		mine := oracleRun(t, uciRunner{}, input, delta, cmds)
		theirs := oracleRun(t, real, input, delta, cmds)
		for _, k := range []string{"Parse error (", "Entry not found", "Invalid argument", "exit 1", "exit 0", "changes p\np.", "='"} {
			if strings.Contains(theirs, k) {
				stats[k]++
			}
		}
		if mine != theirs {
			t.Fatalf("case %d differs\ninput: %q\ndelta: %q\ncommands: %q\n%s", i, input, delta, cmds, firstDiff(mine, theirs))
		}
	}
}

func atoiOr(s string, def int) int {
	n := 0
	if s == "" {
		return def
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return def
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// oracleRun applies commands to a fresh copy of input with a uci (ours,
// or a real one) and returns a transcript of everything observable.
func oracleRun(t *testing.T, u uciRunner, input, delta []byte, cmds [][]string) string {
	tmp, seen := u.tempDir(t)
	conf, save := filepath.Join(tmp, "c"), filepath.Join(tmp, "s")
	os.Mkdir(conf, 0o755)
	os.WriteFile(filepath.Join(conf, "p"), input, 0o644)
	os.WriteFile(filepath.Join(conf, "q"), []byte("config t 's1'\n\toption o1 'v'\n"), 0o600)
	os.WriteFile(filepath.Join(conf, "has.dot"), []byte("config t\n"), 0o644)
	os.Mkdir(filepath.Join(conf, "subdir"), 0o755)
	if delta != nil {
		os.Mkdir(save, 0o700)
		os.WriteFile(filepath.Join(save, "p"), delta, 0o600)
	}
	var tr strings.Builder
	for _, c := range cmds {
		args := append([]string{"-c", seen + "/c", "-t", seen + "/s"}, c...)
		var o, e bytes.Buffer
		code := 0
		if u.bin == "" && u.root == "" {
			cli := &CLI{SaveDir: save, Conf2Dir: filepath.Join(tmp, "none")}
			code = cli.Run(args, &o, &e)
		} else {
			code = u.runReal(t, args, "", &o, &e)
		}
		tr.WriteString("$ " + strings.Join(c, " ") + "\n" + o.String() + "stderr: " + strings.ReplaceAll(e.String(), seen, "TMP") + "exit " + itoaTest(code) + "\n")
	}
	data, _ := os.ReadFile(filepath.Join(conf, "p"))
	deltaNow, _ := os.ReadFile(filepath.Join(save, "p"))
	tr.WriteString("file: " + string(data) + "\ndelta: " + string(deltaNow))
	return tr.String()
}

func itoaTest(n int) string { return strconv.Itoa(n) }

func strconvQuote(s string) string { return strconv.Quote(s) }

var (
	genWords = []string{"config", "option", "list", "package", "c", "o", "l", "p", "bogus", "#", ";", "\\", "'", "\"", " ", "\t", "\n", "\r\n", "a", "b", "x_1", "cfg0192bd", "@t[0]", "a-b", "a.b", "'q q'", "\"d\\\"q\"", "'it'\\''s'", "v#c", "''", "\"\"", "\\\n", "é", "\x00", "\x01", "=", "t", "t2"}
	genVals  = []string{"a", "b", "", "x y", "it's", "q\"", "#", "a\\b", "line1\nline2", "é", "1", "0", "-1", "2", "\t"}
)

func genConfig(rng *rand.Rand) []byte {
	var sb strings.Builder
	if rng.Intn(5) == 0 {
		const alphabet = "config option list package c o l p \t\n\r\v\f'\"\\#;= abc_-.@[]\x00\x01\xc3\xa9"
		for i := rng.Intn(300); i > 0; i-- {
			sb.WriteByte(alphabet[rng.Intn(len(alphabet))])
		}
		return []byte(sb.String())
	}
	if rng.Intn(3) == 0 {
		for i := rng.Intn(60); i > 0; i-- {
			if rng.Intn(10) == 0 {
				sb.WriteString(strings.Repeat("w", rng.Intn(80)))
			}
			sb.WriteString(genWords[rng.Intn(len(genWords))])
			if rng.Intn(2) == 0 {
				sb.WriteByte(' ')
			}
		}
		return []byte(sb.String())
	}
	types := []string{"t", "t2", "a-b"}
	names := []string{"", "", "s1", "s2", "cfg0192bd"}
	opts := []string{"o1", "o2", "l1"}
	for i := rng.Intn(6); i > 0; i-- {
		sb.WriteString("config " + types[rng.Intn(len(types))])
		if n := names[rng.Intn(len(names))]; n != "" {
			sb.WriteString(" '" + n + "'")
		}
		sb.WriteString("\n")
		for j := rng.Intn(5); j > 0; j-- {
			kw := []string{"\toption ", "\tlist "}[rng.Intn(2)]
			sb.WriteString(kw + opts[rng.Intn(len(opts))] + " " + quote(genVals[rng.Intn(len(genVals))]) + "\n")
		}
		if rng.Intn(8) == 0 {
			sb.WriteString(genWords[rng.Intn(len(genWords))] + "\n")
		}
	}
	return []byte(sb.String())
}

func genCommands(rng *rand.Rand) [][]string {
	secs := []string{"s1", "s2", "@t[0]", "@t[-1]", "@t2[1]", "@[0]", "cfg0192bd", "nosuch", "@t[9]", "@bad", "bad-name", ""}
	opts := []string{"", "o1", "o2", "l1", "new"}
	ref := func(withOpt bool) string {
		r := "p." + secs[rng.Intn(len(secs))]
		if withOpt {
			if o := opts[rng.Intn(len(opts))]; o != "" {
				r += "." + o
			}
		}
		return r
	}
	val := func() string { return genVals[rng.Intn(len(genVals))] }
	var cmds [][]string
	flags := [][]string{nil, nil, {"-S"}, {"-X"}, {"-n"}, {"-q"}}
	for i := rng.Intn(8); i > 0; i-- {
		var c []string
		switch rng.Intn(14) {
		case 0:
			c = []string{"set", ref(true) + "=" + val()}
		case 1:
			c = []string{"set", ref(false) + "=" + []string{"t", "t2", "bad type", ""}[rng.Intn(4)]}
		case 2:
			c = []string{"add_list", ref(true) + "=" + val()}
		case 3:
			c = []string{"del_list", ref(true) + "=" + val()}
		case 4:
			c = []string{"delete", ref(true)}
			if rng.Intn(3) == 0 {
				c[1] += "=" + val()
			}
		case 5:
			c = []string{"rename", ref(true) + "=" + []string{"r1", "r2", "bad-name", ""}[rng.Intn(4)]}
		case 6:
			c = []string{"reorder", ref(false) + "=" + []string{"0", "1", "5", "-1", "x"}[rng.Intn(5)]}
		case 7:
			c = []string{"add", "p", []string{"t", "t2", "x y"}[rng.Intn(3)]}
		case 8:
			c = []string{"revert", []string{"p", ref(false), ref(true)}[rng.Intn(3)]}
		case 9:
			c = []string{"get", ref(true)}
		case 10:
			c = []string{"show", []string{"p", ref(false), ref(true)}[rng.Intn(3)]}
		case 11:
			c = []string{"changes", "p"}
		case 12:
			c = []string{"commit", "p"}
		case 13:
			c = []string{"export", "p"}
		}
		c = append(append([]string{}, flags[rng.Intn(len(flags))]...), c...)
		switch rng.Intn(12) {
		case 0:
			c = append(c, []string{"-q", "-X", "-S", "-qX", "-n", "-N"}[rng.Intn(6)])
		case 1:
			c = []string{[]string{"show", "changes", "export", "commit", "-n export", "-d , show"}[rng.Intn(6)]}
			c = strings.Fields(c[0])
		case 2:
			c = [][]string{{"-z", "show"}, {"show", "p", "-c"}, {"bogus", "p"}, {"help"}, {}, {"-q"}, {"get"}, {"show", "p", "q"}, {"-L", "show"}, {"SHOW", "q"}, {"-P", "/nonexistent", "commit", "q"}, {"--", "show", "q"}, {"-p", "/nonexistent", "show", "q"}, {"-s", "-S", "show", "p"}, {"-S", "-s", "show", "p"}}[rng.Intn(15)]
		}
		cmds = append(cmds, c)
	}
	cmds = append(cmds, []string{"changes"}, []string{"show"})
	cmds = append(cmds, []string{"changes", "p"}, []string{"-S", "export", "p"}, []string{"show", "p"}, []string{"commit", "p"})
	return cmds
}

// firstDiff shows the first differing line with some context.
func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(la) || i < len(lb); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			from := i - 6
			if from < 0 {
				from = 0
			}
			ctx := strings.Join(la[from:i], "\n")
			return "context:\n" + ctx + "\n--- ours:  " + strconvQuote(x) + "\n--- real:  " + strconvQuote(y)
		}
	}
	return "(no line differs)"
}

// genDelta makes a delta file: mostly well-formed lines, some broken ones.
func genDelta(rng *rand.Rand) []byte {
	var sb strings.Builder
	pre := []string{"", "+", "-", "@", "^", "|", "~", "x"}
	secs := []string{"s1", "s2", "cfg0192bd", "cfg02796b", "@t[0]", "", "bad-name"}
	opts := []string{"", "", "o1", "l1", "new"}
	for i := rng.Intn(6); i > 0; i-- {
		pkg := "p"
		if rng.Intn(10) == 0 {
			pkg = "q"
		}
		line := pre[rng.Intn(len(pre))] + pkg + "." + secs[rng.Intn(len(secs))]
		if o := opts[rng.Intn(len(opts))]; o != "" {
			line += "." + o
		}
		switch rng.Intn(4) {
		case 0:
		case 1:
			line += "=" + quote(genVals[rng.Intn(len(genVals))])
		case 2:
			line += "=" + []string{"t", "t2", "r1", "0", "2", "-1"}[rng.Intn(6)]
		case 3:
			line += "=" + genWords[rng.Intn(len(genWords))]
		}
		if rng.Intn(8) == 0 {
			line += " extra"
		}
		sb.WriteString(line + "\n")
	}
	return []byte(sb.String())
}
