package surflare

import (
	"fmt"
	"slices"
	"strings"

	"surflare-watchdog/src/suggest"
)

// AutoNode is the node tag with which the vendor picks the best node itself
// (SURFLARE-CONTRACT E1). It is valid whatever `surflare nodes` lists.
const AutoNode = "auto"

// UnknownNodeError is a node name that neither the vendor's list nor the
// configured candidates know. It carries what the person probably meant, so a
// typo is answered with "did you mean" instead of a dropped tunnel.
type UnknownNodeError struct {
	Input       string
	Suggestions []string // closest known names, best first; may be empty
	Known       []string // every name that would have been accepted
}

func (e *UnknownNodeError) Error() string {
	if len(e.Suggestions) > 0 {
		return fmt.Sprintf("unknown node %q: did you mean %s?", e.Input, suggest.Phrase(e.Suggestions))
	}
	return fmt.Sprintf("unknown node %q; known nodes: %s", e.Input, strings.Join(e.Known, ", "))
}

// ResolveNode turns what a person typed into the vendor's node tag. It
// accepts the tag in any case and with spaces, dashes or underscores
// ("los angeles", "LOS-ANGELES" → "Los Angeles"), `auto`, and any name in
// listed (`surflare nodes`, which may be empty when the CLI could not be
// asked) or in candidates (the configured rotation). Anything else is an
// *UnknownNodeError, decided before anything touches the tunnel.
func ResolveNode(input string, listed, candidates []string) (string, error) {
	known := make([]string, 0, len(listed)+len(candidates)+1)
	seen := map[string]bool{}
	for _, group := range [][]string{listed, candidates, {AutoNode}} {
		for _, n := range group {
			if n = strings.TrimSpace(n); n != "" && !seen[n] {
				seen[n] = true
				known = append(known, n)
			}
		}
	}
	if strings.TrimSpace(input) == "" {
		return "", &UnknownNodeError{Input: input, Known: known}
	}
	if n, ok := suggest.Find(input, known); ok {
		return n, nil
	}
	return "", &UnknownNodeError{Input: input, Suggestions: suggest.Closest(input, known, 3), Known: known}
}

// UnlistedNodes checks the configured names (the preferred node and the
// rotation candidates) against the vendor's live list (`surflare nodes`):
// one *UnknownNodeError per name the vendor does not list, with the
// closest listed names as suggestions. `auto` is always valid (E1). The
// config cannot do this when it loads: the list is only known at runtime
// and changes (E1: a rotation must not assume it is fixed), so a name the
// vendor drops later is reported at the next refresh. A name that differs
// from a listed tag only in case or separators is reported too, since
// connect takes the exact tag. An empty listed says nothing: no errors.
func UnlistedNodes(names, listed []string) []*UnknownNodeError {
	if len(listed) == 0 {
		return nil
	}
	var out []*UnknownNodeError
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" || n == AutoNode || seen[n] || slices.Contains(listed, n) {
			continue
		}
		seen[n] = true
		sugg := suggest.Closest(n, listed, 3)
		if m, ok := suggest.Find(n, listed); ok {
			sugg = []string{m}
		}
		out = append(out, &UnknownNodeError{Input: n, Suggestions: sugg, Known: slices.Clone(listed)})
	}
	return out
}
