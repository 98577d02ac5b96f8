package surflare

import (
	"errors"
	"strings"
	"testing"
)

func TestResolveNode(t *testing.T) {
	listed := []string{"Los Angeles", "Chicago", "Dallas", "Tokyo"}
	cands := []string{"Chicago", "Miami"}
	for in, want := range map[string]string{
		"los angeles": "Los Angeles",
		"Los-Angeles": "Los Angeles",
		"CHICAGO":     "Chicago",
		"miami":       "Miami", // a configured candidate the list lacks
		"Auto":        "auto",  // always valid (E1)
		"tokyo":       "Tokyo", // an exit, not only a relay (E1)
	} {
		got, err := ResolveNode(in, listed, cands)
		if err != nil || got != want {
			t.Errorf("ResolveNode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestResolveNodeRefusesTyposWithAdvice(t *testing.T) {
	listed := []string{"Los Angeles", "Chicago", "Dallas"}
	_, err := ResolveNode("chicgo", listed, nil)
	var ue *UnknownNodeError
	if !errors.As(err, &ue) || len(ue.Suggestions) == 0 || ue.Suggestions[0] != "Chicago" {
		t.Fatalf("chicgo: %v", err)
	}
	if !strings.Contains(err.Error(), `did you mean "Chicago"?`) {
		t.Errorf("message: %q", err)
	}
	_, err = ResolveNode("Narnia", listed, nil)
	if !errors.As(err, &ue) || len(ue.Suggestions) != 0 {
		t.Fatalf("Narnia: %v", err)
	}
	if !strings.Contains(err.Error(), "known nodes: Los Angeles, Chicago, Dallas, auto") {
		t.Errorf("message lists the known nodes: %q", err)
	}
	if _, err := ResolveNode("  ", listed, nil); !errors.As(err, &ue) {
		t.Errorf("a blank name is refused: %v", err)
	}
}

func TestResolveNodeWithoutVendorList(t *testing.T) {
	// `surflare nodes` failed: the candidates still resolve, the rest is refused.
	if got, err := ResolveNode("dallas", nil, []string{"Dallas"}); err != nil || got != "Dallas" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := ResolveNode("Houston", nil, []string{"Dallas"}); err == nil {
		t.Fatal("a name nobody knows is refused")
	}
}

// The configured node and candidates checked against the vendor's live
// list (E1): auto and listed tags (Tokyo among them) pass; a name the
// vendor does not list is named, with a did-you-mean; a wrong case is
// reported with the exact tag; nothing is judged without a list.
func TestUnlistedNodes(t *testing.T) {
	listed := []string{"Dallas", "Los Angeles", "Tokyo"}
	got := UnlistedNodes([]string{"auto", "Tokyo", "Dalas", "los angeles", "Miami", "Dalas"}, listed)
	var msgs []string
	for _, e := range got {
		msgs = append(msgs, e.Error())
	}
	want := []string{
		`unknown node "Dalas": did you mean "Dallas"?`,
		`unknown node "los angeles": did you mean "Los Angeles"?`,
		`unknown node "Miami"; known nodes: Dallas, Los Angeles, Tokyo`,
	}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Errorf("UnlistedNodes:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
	if got := UnlistedNodes([]string{"Miami"}, nil); got != nil {
		t.Errorf("without a list: %v, want nothing", got)
	}
}
