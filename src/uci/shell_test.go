package uci

import (
	"fmt"
	"strings"
	"testing"
)

// shellWords splits a command line the way bash does for the quoting the
// round-trip fixtures use: '…', "…" (\ escapes only \ " $ `), $'…' with
// C escapes, and backslash outside quotes.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\\':
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			}
			inWord = true
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '$' && i+1 < len(s) && s[i+1] == '\'':
			i += 2
			for ; i < len(s) && s[i] != '\''; i++ {
				if s[i] != '\\' || i+1 >= len(s) {
					cur.WriteByte(s[i])
					continue
				}
				i++
				switch s[i] {
				case 'n':
					cur.WriteByte('\n')
				case 't':
					cur.WriteByte('\t')
				case 'r':
					cur.WriteByte('\r')
				default:
					cur.WriteByte(s[i])
				}
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated $' in %q", s)
			}
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\\\"$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated \" in %q", s)
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

func TestShellWords(t *testing.T) {
	got, err := shellWords(`set a.b.c=$'x\ny' "it's" 'a\b' x\ y ''`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"set", "a.b.c=x\ny", "it's", `a\b`, "x y", ""}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
