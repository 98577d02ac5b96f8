package uci

import (
	"math/rand"
	"os"
	"strings"
	"testing"

	"surflare-watchdog/src/testenv"
)

// TestBatchImportAgainstRealUCI runs OpenWrt's own uci (from the OpenWrt
// userland beside the repository, through chroot) on the batchCases and on
// generated batches and imports, and compares each transcript with ours
// byte for byte: output, errors, exit status, and the files left behind
// with their modes. UCI_ORACLE_N sets the number of generated cases
// (default 200), UCI_ORACLE_SEED the seed.
func TestBatchImportAgainstRealUCI(t *testing.T) {
	real := uciRunner{root: testenv.OpenWrtRoot(t)}
	for _, c := range batchCases {
		if got := real.runCase(t, c); got != c.want {
			t.Errorf("%s: the real uci's transcript changed: uci %q\n%s", c.name, c.args, firstDiff(c.want, got))
		}
	}
	n := atoiOr(os.Getenv("UCI_ORACLE_N"), 200)
	rng := rand.New(rand.NewSource(int64(atoiOr(os.Getenv("UCI_ORACLE_SEED"), 1))))
	stats := map[string]int{}
	for i := 0; i < n; i++ {
		c := genBatchCase(rng)
		mine, theirs := (uciRunner{}).runCase(t, c), real.runCase(t, c)
		for _, k := range []string{"Parse error", "Unknown command", "Too many", "Duplicate", "Invalid argument", "exit 1", "s/p "} {
			if strings.Contains(theirs, k) {
				stats[k]++
			}
		}
		if mine != theirs {
			t.Fatalf("generated case %d differs: uci %q\nconfig: %q\ndelta: %q\ninput: %q\n%s", i, c.args, c.conf["p"], c.delta, c.stdin+c.file, firstDiff(mine, theirs))
		}
	}
	t.Logf("%d fixed and %d generated cases identical to the real uci; generated cases showing: %v", len(batchCases), n, stats)
}

// genBatchCase makes a random batch or import: commands from the oracle's
// generator written as batch lines with every kind of quoting, plus
// comments, blank lines, ';', too many words, exit and a trailing
// unterminated quote; or config text (with package statements) to import
// with and without a name, -m and -S.
func genBatchCase(rng *rand.Rand) batchCase {
	c := batchCase{conf: map[string]string{"p": string(genConfig(rng)), "q": "config t 's1'\n"}}
	if rng.Intn(4) == 0 {
		c.delta = string(genDelta(rng))
	}
	var in string
	if rng.Intn(2) == 0 {
		in = genBatchInput(rng)
		c.args = []string{"batch"}
	} else {
		in = genImportInput(rng)
		c.args = [][]string{{"import"}, {"import", "p"}, {"import", "newp"}, {"-m", "import", "p"}, {"-m", "import", "newp"},
			{"-S", "import"}, {"-S", "import", "p"}, {"-m", "-S", "import", "p"}, {"-m", "import"}, {"import", "p", "q"},
			{"import", "has.dot"}, {"-n", "import", "p"}}[rng.Intn(12)]
	}
	if rng.Intn(5) == 0 {
		c.file = in
		c.args = append([]string{"-f", "DIR/in"}, c.args...)
	} else {
		c.stdin = in
	}
	if rng.Intn(5) == 0 {
		flags := [][]string{{"-q"}, {"-S"}, {"-X"}, {"-d,"}, {"-n"}, {"-P", "DIR/s"}, {"-p", "DIR/s"}, {"-C", "DIR/c"}}
		c.args = append(flags[rng.Intn(len(flags))], c.args...)
	}
	return c
}

func genBatchInput(rng *rand.Rand) string {
	var sb strings.Builder
	for _, cmd := range genCommands(rng) {
		switch rng.Intn(14) {
		case 0:
			sb.WriteString("# " + strings.Join(cmd, " ") + "\n")
			continue
		case 1:
			sb.WriteString([]string{"\n", "  \t\n", "\r\n", ";\n"}[rng.Intn(4)])
		case 2:
			cmd = append(cmd, "extra", "words")
		case 3:
			sb.WriteString([]string{"exit\n", "EXIT ignored\n", "batch\n", "bogus p\n", "help\n"}[rng.Intn(5)])
		}
		for i, w := range cmd {
			if i > 0 {
				sb.WriteString([]string{" ", "\t", "  "}[rng.Intn(3)])
			}
			sb.WriteString(batchWord(rng, w))
		}
		switch rng.Intn(8) {
		case 0:
			sb.WriteString("; set p.s1.o1=after")
		case 1:
			sb.WriteString(" # comment")
		case 2:
			sb.WriteString(" \\\n")
		}
		sb.WriteString("\n")
		if rng.Intn(15) == 0 {
			sb.WriteString("import p\n" + string(genConfig(rng)))
		}
	}
	if rng.Intn(6) == 0 {
		sb.WriteString("set p.s1.o1='unterminated\n")
	}
	return sb.String()
}

// batchWord writes w so the uci tokenizer reads it back: bare when it
// can, otherwise in single or double quotes.
func batchWord(rng *rand.Rand, w string) string {
	if w != "" && !strings.ContainsAny(w, " \t\r\n'\"\\#;") && rng.Intn(2) == 0 {
		return w
	}
	if rng.Intn(2) == 0 {
		return quote(w)
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(w) + `"`
}

func genImportInput(rng *rand.Rand) string {
	var sb strings.Builder
	if rng.Intn(2) == 0 {
		sb.WriteString([]string{"package p\n", "package q\n", "package 'p'\n", "package has.dot\n", "package\n"}[rng.Intn(5)])
	}
	sb.Write(genConfig(rng))
	if rng.Intn(3) == 0 {
		sb.WriteString([]string{"package q\n", "package p\n", "package newp\n"}[rng.Intn(3)])
		sb.Write(genConfig(rng))
	}
	return sb.String()
}
