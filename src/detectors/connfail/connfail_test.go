package connfail

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const (
	line111 = `+0000 2026-11-29 14:03:11 ERROR [1820334452 5.0s] inbound/tproxy[tproxy-in]: process connection from 192.168.1.10:51234: dial tcp 198.18.5.7:443: i/o timeout`
	line112 = `+0000 2026-11-29 14:03:11 ERROR [2210337101 5.8s] connection: open connection to example.com:443 using outbound/vless[Dallas]: dial tcp 198.18.5.7:443: i/o timeout`
)

func mustParser(t *testing.T, p []string) *Parser {
	t.Helper()
	ps, err := NewParser(p)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestParseBothFormats(t *testing.T) {
	p := mustParser(t, nil)
	f, ok := p.Parse(line112)
	if !ok || f.Outbound != "Dallas" || f.Dest != "example.com:443" || f.Class != Timeout {
		t.Fatalf("1.12+: %+v %v", f, ok)
	}
	f, ok = p.Parse(line111)
	if !ok || f.Outbound != "" || f.Dest != "198.18.5.7:443" || f.Class != Timeout || !strings.HasPrefix(f.Error, "dial tcp") {
		t.Fatalf("1.8–1.11: %+v %v", f, ok)
	}
	// Without the timestamp prefix (the proxy's stderr) too.
	if f, ok := p.Parse(line112[strings.Index(line112, "ERROR"):]); !ok || f.Outbound != "Dallas" {
		t.Fatalf("bare: %+v", f)
	}
}

func TestParseIgnoresOtherLines(t *testing.T) {
	p := mustParser(t, nil)
	for _, l := range []string{
		"",
		`+0000 2026-11-29 14:03:11 ERROR [1 2.1s] outbound/urltest[Dallas via Tokyo]: Get "http://198.18.30.21/generate_204": context deadline exceeded`,
		`+0000 2026-11-29 14:03:11 INFO [2 0.1s] inbound/tproxy[tproxy-in]: inbound connection from 192.168.1.10:51234`,
		`+0000 2026-11-29 14:03:11 INFO [2 0.1s] connection: open connection to example.com:443 using outbound/vless[Dallas]`,
		"garbage \x00\xff",
	} {
		if f, ok := p.Parse(l); ok {
			t.Errorf("parsed %q as %+v", l, f)
		}
	}
}

func TestClasses(t *testing.T) {
	for e, want := range map[string]Class{
		"dial tcp 1.2.3.4:443: i/o timeout":                    Timeout,
		"dial tcp 1.2.3.4:443: connect: connection refused":    Refused,
		"read tcp 1.2.3.4:443: connection reset by peer":       Reset,
		"context canceled":                                     Canceled,
		"lookup example.invalid on 127.0.0.1:53: no such host": Resolve,
		"dial tcp 1.2.3.4:443: connect: no route to host":      Timeout,
		"tls: handshake failure":                               Other,
	} {
		if got := classify(e); got != want {
			t.Errorf("classify(%q) = %s; want %s", e, got, want)
		}
	}
	if Canceled.Evidence() || Resolve.Evidence() || !Timeout.Evidence() || !Reset.Evidence() {
		t.Error("evidence classes")
	}
}

func TestCustomPattern(t *testing.T) {
	p := mustParser(t, []string{`ERROR conn to (?P<dest>\S+) via (?P<outbound>\w+) failed: (?P<error>.*)`})
	f, ok := p.Parse("ERROR conn to 1.2.3.4:443 via Miami failed: i/o timeout")
	if !ok || f.Outbound != "Miami" || f.Class != Timeout {
		t.Fatalf("%+v %v", f, ok)
	}
	if _, err := NewParser([]string{`ERROR (?P<dest>x)`}); err == nil || !strings.Contains(err.Error(), "group named error") {
		t.Fatalf("a pattern without an error group is refused: %v", err)
	}
	if _, err := NewParser([]string{`(`}); err == nil || !strings.Contains(err.Error(), "pattern 1") {
		t.Fatalf("a broken pattern says which: %v", err)
	}
}

func TestWindow(t *testing.T) {
	w := NewWindow(10*time.Second, 3)
	t0 := time.Unix(1000, 0)
	timeout := func(dest string) Failure { return Failure{Class: Timeout, Dest: dest} }
	if n, d := w.Add(timeout("a:443"), "Dallas", t0); n != 1 || d != 1 {
		t.Fatalf("first: %d %d", n, d)
	}
	if n, _ := w.Add(Failure{Class: Canceled}, "Dallas", t0); n != 0 {
		t.Fatalf("a client that hangs up is no evidence: %d", n)
	}
	if n, d := w.Add(timeout("a:443"), "Dallas", t0.Add(time.Second)); n != 2 || d != 1 {
		t.Fatalf("one website twice is one destination: %d %d", n, d)
	}
	if n, _ := w.Add(Failure{Outbound: "Miami", Class: Reset, Dest: "b:443"}, "Dallas", t0.Add(2*time.Second)); n != 1 {
		t.Fatalf("a named outbound counts for itself: %d", n)
	}
	if n, _ := w.Count("Dallas", t0.Add(2*time.Second)); n != 2 {
		t.Fatalf("Dallas: %d", n)
	}
	if n, _ := w.Count("Dallas", t0.Add(10500*time.Millisecond)); n != 1 {
		t.Fatalf("the oldest left the window: %d", n)
	}
	for i := 0; i < 10; i++ {
		w.Add(timeout(fmt.Sprintf("h%d:443", i)), "Dallas", t0.Add(11*time.Second))
	}
	if n, d := w.Count("Dallas", t0.Add(11*time.Second)); n != 3 || d != 3 {
		t.Fatalf("bounded by Max: %d %d", n, d)
	}
	w.Reset("Dallas")
	if n, _ := w.Count("Dallas", t0.Add(11*time.Second)); n != 0 {
		t.Fatalf("reset: %d", n)
	}
	if n, _ := w.Add(timeout("a:443"), "", t0); n != 0 {
		t.Fatalf("no outbound and no current node: %d", n)
	}
}

func BenchmarkParseNonMatching(b *testing.B) {
	p, _ := NewParser(nil)
	l := `+0000 2026-11-29 14:03:11 INFO [2 0.1s] inbound/tproxy[tproxy-in]: inbound packet from 192.168.1.10:51234`
	for i := 0; i < b.N; i++ {
		p.Parse(l)
	}
}

func BenchmarkParseFailure(b *testing.B) {
	p, _ := NewParser(nil)
	for i := 0; i < b.N; i++ {
		p.Parse(line112)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(line111)
	f.Add(line112)
	f.Add("ERROR connection: open connection to")
	p, _ := NewParser(nil)
	f.Fuzz(func(t *testing.T, l string) {
		fl, ok := p.Parse(l)
		if !ok {
			return
		}
		if !strings.Contains(l, fl.Error) || !strings.Contains(l, fl.Outbound) || !strings.Contains(l, fl.Dest) {
			t.Fatalf("fields not from the line: %+v", fl)
		}
		if fl.Class == "" {
			t.Fatal("unclassified")
		}
	})
}
