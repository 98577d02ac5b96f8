package loghealth

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"surflare-watchdog/src/config"
)

// MaxErrorLen is how many characters of an urltest error are kept as
// last_error (SURFLARE-CONTRACT.md): enough to tell a timeout from a 503,
// short enough for the LuCI table and the JSON file to stay small.
const MaxErrorLen = 120

// MaxLineLen bounds one log line. sing-box lines are a few hundred bytes; a
// longer "line" is binary garbage or a runaway message and is skipped, so a
// file without newlines can never make the reader buffer without limit.
const MaxLineLen = 64 << 10

// timeLayout is sing-box's line prefix, e.g. "+0000 2026-11-29 14:03:11".
const timeLayout = "-0700 2006-01-02 15:04:05"

// Kind says what ParseLine made of a line; the counts of each kind are the
// follower's Stats.
type Kind int

// Line kinds.
const (
	Ignored Kind = iota // a readable line that is not an urltest error (INFO, other errors)
	Matched             // an urltest error with node and transit
	Garbage             // binary, invalid UTF-8, over-long, or a match with an empty node/transit
)

// Line is one urltest error of the proxy log.
type Line struct {
	// Time is the line's own timestamp; zero when the line has none, and
	// then the reader stamps it with the time it read the line.
	Time    time.Time
	Node    string
	Transit string
	// Error is the message after the node/transit tag, control characters
	// removed and cut to MaxErrorLen characters.
	Error string
}

// Key is the node/transit pair as the proxy writes it and as the JSON file
// keys it: "Dallas via Tokyo".
func (l Line) Key() string { return Key(l.Node, l.Transit) }

// Key formats a node/transit pair the way the proxy log and the node health
// file name it.
func Key(node, transit string) string { return node + " via " + transit }

// Is503 reports whether the urltest failed with HTTP 503: the node answered
// but is overloaded (ADR-0001's storm signal), as opposed to a timeout.
func (l Line) Is503() bool { return hasStatus503(l.Error) }

// hasStatus503 finds "503" standing alone as a status code ("unexpected
// status: 503 Service Unavailable", "HTTP 503.", "status 503: ..."), not as
// a piece of an address or of another number. The errors embed addresses
// and figures: `\b503\b` also matched the IPv6 group in "dial tcp
// [2606:4700:503::1]:443: i/o timeout", a port (":503") and a decimal
// ("503.2ms"), and called a dead path a 503 storm, which reconnects to the
// node instead of leaving it (ADR-0001).
func hasStatus503(s string) bool {
	for from := 0; ; {
		i := strings.Index(s[from:], "503")
		if i < 0 {
			return false
		}
		i += from
		if status503Alone(s, i, i+3) {
			return true
		}
		from = i + 1
	}
}

// status503Alone: what precedes s[i:end] is no word, address or number
// character, and what follows is none either, or a '.' or ':' that ends a
// sentence or a label rather than continuing an address or a number.
func status503Alone(s string, i, end int) bool {
	if i > 0 {
		if b, _ := utf8.DecodeLastRuneInString(s[:i]); wordRune(b) || b == '.' || b == ':' || b == '/' {
			return false
		}
	}
	if end == len(s) {
		return true
	}
	a, n := utf8.DecodeRuneInString(s[end:])
	switch {
	case wordRune(a):
		return false
	case a == '.' || a == ':':
		if end+n == len(s) {
			return true
		}
		next, _ := utf8.DecodeRuneInString(s[end+n:])
		return !wordRune(next) && next != ':' && next != '.' && next != ']'
	}
	return true
}

func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

// Parser recognises urltest errors with a pattern from the config
// (loghealth.pattern), so a vendor change of log format is a config edit.
type Parser struct {
	re                      *regexp.Regexp
	node, transit, errGroup int // submatch indexes; errGroup -1 when the pattern has none
}

// NewParser checks that re has the named groups node and transit (error is
// optional; without it the whole line is the error). A nil re means
// config.DefaultLogPattern.
func NewParser(re *regexp.Regexp) (*Parser, error) {
	if re == nil {
		re = regexp.MustCompile(config.DefaultLogPattern)
	}
	p := &Parser{re: re, node: re.SubexpIndex("node"), transit: re.SubexpIndex("transit"), errGroup: re.SubexpIndex("error")}
	if p.node < 0 || p.transit < 0 {
		return nil, fmt.Errorf("log pattern %q: needs the named groups (?P<node>…) and (?P<transit>…)", re.String())
	}
	return p, nil
}

// ParseLine classifies one line (without its newline). Only a Matched line
// fills the returned Line. It never panics, whatever the bytes.
func (p *Parser) ParseLine(b []byte) (Line, Kind) {
	b = bytes.TrimSuffix(b, []byte{'\r'})
	if len(b) > MaxLineLen || bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
		return Line{}, Garbage
	}
	m := p.re.FindSubmatchIndex(b)
	if m == nil {
		return Line{}, Ignored
	}
	group := func(i int) string {
		if i < 0 || m[2*i] < 0 {
			return ""
		}
		return string(b[m[2*i]:m[2*i+1]])
	}
	l := Line{Node: clean(group(p.node), 0), Transit: clean(group(p.transit), 0)}
	if l.Node == "" || l.Transit == "" {
		return Line{}, Garbage
	}
	if p.errGroup >= 0 {
		l.Error = clean(group(p.errGroup), MaxErrorLen)
	} else {
		l.Error = clean(string(b), MaxErrorLen)
	}
	if len(b) >= len(timeLayout) {
		if t, err := time.Parse(timeLayout, string(b[:len(timeLayout)])); err == nil {
			l.Time = t
		}
	}
	return l, Matched
}

// clean trims s, replaces control characters with spaces and keeps at most
// max characters (0 = no limit), so nothing a log line holds can break the
// JSON consumers or a terminal table.
func clean(s string, max int) string {
	s = strings.TrimSpace(s)
	var sb strings.Builder
	n := 0
	for _, r := range s {
		if max > 0 && n == max {
			break
		}
		if unicode.IsControl(r) {
			r = ' '
		}
		sb.WriteRune(r)
		n++
	}
	return sb.String()
}
