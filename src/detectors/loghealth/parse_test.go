package loghealth

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// The two example lines of SURFLARE-CONTRACT.md.
const (
	contractTimeout = `+0000 2026-11-29 14:03:11 ERROR [1820334452 2.1s] outbound/urltest[Dallas via Tokyo]: Get "http://198.18.30.21/generate_204": context deadline exceeded`
	contract503     = `+0000 2026-11-29 14:03:12 ERROR [2210337101 0.4s] outbound/urltest[Miami via auto]: unexpected status: 503 Service Unavailable`
)

func mustParser(t testing.TB) *Parser {
	t.Helper()
	p, err := NewParser(nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseContractLines(t *testing.T) {
	p := mustParser(t)
	l, kind := p.ParseLine([]byte(contractTimeout))
	if kind != Matched {
		t.Fatalf("contract timeout line: kind %v, want Matched", kind)
	}
	want := Line{
		Time: time.Date(2026, 11, 29, 14, 3, 11, 0, time.UTC),
		Node: "Dallas", Transit: "Tokyo",
		Error: `Get "http://198.18.30.21/generate_204": context deadline exceeded`,
	}
	if !l.Time.Equal(want.Time) || l.Node != want.Node || l.Transit != want.Transit || l.Error != want.Error {
		t.Errorf("got %+v\nwant %+v", l, want)
	}
	if l.Is503() {
		t.Error("a timeout counted as a 503")
	}
	l, kind = p.ParseLine([]byte(contract503))
	if kind != Matched || l.Key() != "Miami via auto" || !l.Is503() {
		t.Errorf("503 line: kind %v, %+v, Is503 %v", kind, l, l.Is503())
	}
}

func TestParseLineKinds(t *testing.T) {
	p := mustParser(t)
	long := "+0000 2026-11-29 14:03:11 ERROR [1 1s] outbound/urltest[Dallas via Tokyo]: " + strings.Repeat("x", MaxLineLen)
	cases := []struct {
		name, line string
		kind       Kind
		key        string
	}{
		{"node with spaces", "+0800 2026-11-29 22:03:11 ERROR [1 1s] outbound/urltest[Los Angeles via Hong Kong]: EOF", Matched, "Los Angeles via Hong Kong"},
		{"no timestamp still counts", "ERROR outbound/urltest[Chicago via auto]: EOF", Matched, "Chicago via auto"},
		{"crlf", "ERROR outbound/urltest[Chicago via auto]: EOF\r", Matched, "Chicago via auto"},
		{"info line", "+0000 2026-11-29 14:03:11 INFO outbound/urltest[Dallas via Tokyo]: ok", Ignored, ""},
		{"other error", "+0000 2026-11-29 14:03:11 ERROR [1 1s] inbound/tproxy[in]: connection reset", Ignored, ""},
		{"empty", "", Ignored, ""},
		{"no transit", "ERROR outbound/urltest[Dallas]: EOF", Ignored, ""},
		{"blank node", "ERROR outbound/urltest[\t via auto]: EOF", Garbage, ""},
		{"NUL bytes", "ERROR outbound/urltest[Dallas via Tokyo]: \x00\x00", Garbage, ""},
		{"invalid utf-8", "ERROR outbound/urltest[Dal\xff\xfelas via Tokyo]: EOF", Garbage, ""},
		{"over-long", long, Garbage, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, kind := p.ParseLine([]byte(c.line))
			if kind != c.kind {
				t.Fatalf("kind %v, want %v", kind, c.kind)
			}
			if c.key != "" && l.Key() != c.key {
				t.Errorf("key %q, want %q", l.Key(), c.key)
			}
		})
	}
}

func TestParseOffsetTimestamp(t *testing.T) {
	l, _ := mustParser(t).ParseLine([]byte("+0800 2026-11-29 22:03:11 ERROR [1 1s] outbound/urltest[Dallas via Tokyo]: EOF"))
	if want := time.Date(2026, 11, 29, 14, 3, 11, 0, time.UTC); !l.Time.Equal(want) {
		t.Errorf("time %v, want %v (the +0800 offset applied)", l.Time, want)
	}
}

func TestLastErrorIsCutAndClean(t *testing.T) {
	msg := "é\tweird " + strings.Repeat("ü", 300)
	l, kind := mustParser(t).ParseLine([]byte("ERROR outbound/urltest[Dallas via Tokyo]: " + msg))
	if kind != Matched {
		t.Fatal(kind)
	}
	if n := len([]rune(l.Error)); n != MaxErrorLen {
		t.Errorf("last error has %d characters, want %d", n, MaxErrorLen)
	}
	if strings.ContainsRune(l.Error, '\t') {
		t.Errorf("control character kept: %q", l.Error)
	}
}

func TestPatternFromConfig(t *testing.T) {
	if _, err := NewParser(regexp.MustCompile(`urltest\[(?P<node>\w+)\]`)); err == nil || !strings.Contains(err.Error(), "transit") {
		t.Errorf("pattern without transit group: err %v, want one naming the missing group", err)
	}
	// A vendor that changed its format: a custom pattern without an error group.
	p, err := NewParser(regexp.MustCompile(`FAIL node=(?P<node>\S+) relay=(?P<transit>\S+)`))
	if err != nil {
		t.Fatal(err)
	}
	l, kind := p.ParseLine([]byte("2026 FAIL node=Dallas relay=Tokyo 503"))
	if kind != Matched || l.Key() != "Dallas via Tokyo" || !l.Is503() {
		t.Errorf("custom pattern: kind %v line %+v", kind, l)
	}
}

// FuzzParseLine: any bytes parse without a panic; a match always has a node,
// a transit, and a last error within bounds and free of control characters.
func FuzzParseLine(f *testing.F) {
	f.Add([]byte(contractTimeout))
	f.Add([]byte(contract503))
	f.Add([]byte("ERROR outbound/urltest[ via ]: "))
	f.Add([]byte("+0000 2026-13-45 99:99:99 ERROR outbound/urltest[a via b]]: \x00"))
	f.Add([]byte{0xff, 0xfe, '\n'})
	p := mustParser(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		l, kind := p.ParseLine(b)
		if kind != Matched {
			return
		}
		if l.Node == "" || l.Transit == "" {
			t.Fatalf("match without node/transit: %+v", l)
		}
		if n := len([]rune(l.Error)); n > MaxErrorLen {
			t.Fatalf("last error of %d characters", n)
		}
		for _, r := range l.Error + l.Node + l.Transit {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("control character %q in %+v", r, l)
			}
		}
	})
}

// A 503 is a status code standing alone, not three digits of an address
// or a figure in the error: those are timeouts or resets of a dead path,
// and calling them a 503 storm reconnects to the node instead of leaving
// it (ADR-0001).
func TestIs503OnlyForTheStatusCode(t *testing.T) {
	for e, want := range map[string]bool{
		"unexpected status: 503 Service Unavailable": true,
		"HTTP 503":                            true,
		"got HTTP 503.":                       true,
		"bad status 503: Service Unavailable": true,
		"(503)":                               true,
		"503 Service Unavailable":             true,
		`Get "http://[2606:4700:503::1]/generate_204": context deadline exceeded`: false,
		"dial tcp [fd00:5:503:7::2]:443: i/o timeout":                             false,
		"dial tcp 198.18.5.7:503: connect: connection refused":                    false,
		"read tcp 198.18.0.2:50312->198.18.5.7:443: connection reset by peer":     false,
		"i/o timeout after 503.2ms":                                               false,
		"unexpected status: 5030":                                                 false,
		"GET /status/503/x: i/o timeout":                                          false,
		"":                                                                        false,
	} {
		if got := (Line{Error: e}).Is503(); got != want {
			t.Errorf("Is503(%q) = %v, want %v", e, got, want)
		}
	}
}
