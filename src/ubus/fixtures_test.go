package ubus

import (
	"bufio"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"surflare-watchdog/src/testenv"
	"testing"
)

func fixtureDir(t testing.TB) string { return testenv.Fixtures(t, "ubus") }

// traceLine is one message of a golden trace.
type traceLine struct {
	toClient bool // S>C: from ubusd to the client under test
	msg      []byte
}

// loadTrace reads a `<scenario>[.<role>].trace` file.
func loadTrace(t testing.TB, name string) []traceLine {
	t.Helper()
	f, err := os.Open(filepath.Join(fixtureDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []traceLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4*MaxMessageLen)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		dir, hexMsg, ok := strings.Cut(line, " ")
		if !ok || (dir != "S>C" && dir != "C>S") {
			t.Fatalf("%s:%d: malformed line %q", name, n, line)
		}
		b, err := hex.DecodeString(hexMsg)
		if err != nil {
			t.Fatalf("%s:%d: %v", name, n, err)
		}
		out = append(out, traceLine{toClient: dir == "S>C", msg: b})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// allTraces lists every *.trace fixture.
func allTraces(t testing.TB) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(fixtureDir(t), "*.trace"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no traces found: %v", err)
	}
	for i := range names {
		names[i] = filepath.Base(names[i])
	}
	return names
}
