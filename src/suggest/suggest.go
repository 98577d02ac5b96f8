// Package suggest answers "did you mean …?" for words a person typed: node
// names, subcommands, flags and UCI option names.
//
// A household types "los angeles" for "Los Angeles" or "chicgo" for
// "Chicago" at 11 pm; the answer must name the word they meant rather than
// only refuse. Matching folds case and the separators people use
// interchangeably (space, dash, underscore, dot), then ranks the candidates by
// edit distance (Damerau–Levenshtein, so a swapped pair of letters costs one),
// with prefixes counted as close: "los" suggests "Los Angeles".
package suggest

import (
	"sort"
	"strings"
	"unicode"
)

// Fold is the form two words are compared in: lower case, without spaces,
// dashes, underscores or dots. "Los Angeles", "los-angeles" and "LOS_ANGELES"
// all fold to "losangeles".
func Fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case unicode.IsSpace(r), r == '-', r == '_', r == '.':
			continue
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// Find returns the candidate that input names once folded, if exactly one
// does. Several candidates that fold alike ("a-b" and "a b") are ambiguous:
// the exact spelling then wins, and without it nothing matches.
func Find(input string, candidates []string) (string, bool) {
	f := Fold(input)
	if f == "" {
		return "", false
	}
	var found []string
	for _, c := range candidates {
		if Fold(c) == f {
			if c == input {
				return c, true
			}
			found = append(found, c)
		}
	}
	if len(found) == 1 {
		return found[0], true
	}
	return "", false
}

// Closest returns up to max candidates close enough to input to be what the
// person meant, best first. Close means: a prefix of the folded candidate (of
// at least two letters), or within an edit distance that grows with the
// word's length (1 for short words, up to a third of the letters). Nothing
// close gives nil: a suggestion that is wrong is worse than none.
func Closest(input string, candidates []string, max int) []string {
	f := Fold(input)
	if f == "" || max <= 0 {
		return nil
	}
	type scored struct {
		name string
		d    int
	}
	var out []scored
	seen := map[string]bool{}
	for _, c := range candidates {
		if seen[c] {
			continue
		}
		seen[c] = true
		fc := Fold(c)
		if fc == "" {
			continue
		}
		d := Distance(f, fc)
		switch {
		case d <= budget(f, fc):
		case len([]rune(f)) >= 2 && strings.HasPrefix(fc, f):
			// A prefix ranks after every near-miss of the same length.
			d = budget(f, fc) + 1
		default:
			continue
		}
		out = append(out, scored{c, d})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].d < out[j].d })
	if len(out) == 0 {
		return nil
	}
	if len(out) > max {
		out = out[:max]
	}
	names := make([]string, len(out))
	for i, s := range out {
		names[i] = s.name
	}
	return names
}

// budget is how many edits still count as a typo: one for words of up to
// four letters, then a third of the shorter word.
func budget(a, b string) int {
	n := len([]rune(a))
	if m := len([]rune(b)); m < n {
		n = m
	}
	if n <= 4 {
		return 1
	}
	return n / 3
}

// Distance is the optimal-string-alignment edit distance between a and b
// (insertions, deletions, substitutions and transpositions of neighbours
// each cost one), in runes.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) == 0 {
		return len(rb)
	}
	if len(rb) == 0 {
		return len(ra)
	}
	// Three rows: the one before last, the last and the current.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			v := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				v = min(v, prev2[j-2]+1)
			}
			cur[j] = v
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// Phrase renders suggestions for a message: `"Chicago"`, `"Dallas" or
// "Dayton"`, `"A", "B" or "C"`.
func Phrase(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = `"` + n + `"`
	}
	switch len(q) {
	case 0:
		return ""
	case 1:
		return q[0]
	default:
		return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
	}
}
