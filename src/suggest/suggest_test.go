package suggest

import (
	"reflect"
	"testing"
)

var nodes = []string{"Los Angeles", "Chicago", "Dallas", "Miami", "New York", "Seattle", "Tokyo", "auto"}

func TestFindFoldsCaseAndSeparators(t *testing.T) {
	for in, want := range map[string]string{
		"los angeles": "Los Angeles",
		"LOS-ANGELES": "Los Angeles",
		"los_angeles": "Los Angeles",
		"LosAngeles":  "Los Angeles",
		" chicago ":   "Chicago",
		"AUTO":        "auto",
		"new-york":    "New York",
	} {
		got, ok := Find(in, nodes)
		if !ok || got != want {
			t.Errorf("Find(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"Narnia", "", "  ", "Chicag", "los"} {
		if got, ok := Find(in, nodes); ok {
			t.Errorf("Find(%q) = %q; want no match", in, got)
		}
	}
}

func TestFindAmbiguousPrefersExactSpelling(t *testing.T) {
	c := []string{"a-b", "a b"}
	if got, ok := Find("a b", c); !ok || got != "a b" {
		t.Errorf("exact spelling: got %q, %v", got, ok)
	}
	if got, ok := Find("A_B", c); ok {
		t.Errorf("two candidates fold alike: got %q, want no match", got)
	}
}

func TestClosest(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"chicgo", []string{"Chicago"}},  // one deletion
		{"chciago", []string{"Chicago"}}, // a swapped pair
		{"dalas", []string{"Dallas"}},    // short word, one edit
		{"los", []string{"Los Angeles"}}, // a prefix
		{"seatle", []string{"Seattle"}},  // one edit
		{"Narnia", nil},                  // nothing close: no guess
		{"x", nil},                       // one letter suggests nothing
		{"toky", []string{"Tokyo"}},      // within budget
		{"newyork", nil},                 // exact after folding: not a typo, Find's job; distance 0 counts
	}
	for _, c := range cases {
		got := Closest(c.in, nodes, 3)
		if c.in == "newyork" {
			if !reflect.DeepEqual(got, []string{"New York"}) {
				t.Errorf("Closest(%q) = %v", c.in, got)
			}
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Closest(%q) = %v; want %v", c.in, got, c.want)
		}
	}
}

func TestClosestRanksAndLimits(t *testing.T) {
	opts := []string{"reconnect_limit", "reconnect_window", "rotate_limit"}
	got := Closest("reconect_limit", opts, 2)
	if len(got) == 0 || got[0] != "reconnect_limit" {
		t.Fatalf("Closest ranks the nearest first: %v", got)
	}
	if len(got) > 2 {
		t.Fatalf("max not honoured: %v", got)
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "ab", 2}, {"abc", "abc", 0},
		{"abc", "acb", 1}, {"kitten", "sitting", 3}, {"ca", "abc", 3},
		{"東京", "東京", 0}, {"東京", "京東", 1},
	} {
		if got := Distance(c.a, c.b); got != c.d {
			t.Errorf("Distance(%q,%q) = %d; want %d", c.a, c.b, got, c.d)
		}
		if got := Distance(c.b, c.a); got != c.d {
			t.Errorf("Distance(%q,%q) = %d; want %d (symmetry)", c.b, c.a, got, c.d)
		}
	}
}

func TestPhrase(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{nil, ""}, {[]string{"A"}, `"A"`}, {[]string{"A", "B"}, `"A" or "B"`},
		{[]string{"A", "B", "C"}, `"A", "B" or "C"`},
	} {
		if got := Phrase(c.in); got != c.want {
			t.Errorf("Phrase(%v) = %q; want %q", c.in, got, c.want)
		}
	}
}

func FuzzClosest(f *testing.F) {
	f.Add("chicgo", "Chicago")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, in, cand string) {
		got := Closest(in, []string{cand, "Dallas"}, 2)
		if len(got) > 2 {
			t.Fatalf("more than max: %v", got)
		}
		if d := Distance(in, cand); d < 0 || d > len([]rune(in))+len([]rune(cand)) {
			t.Fatalf("distance out of range: %d", d)
		}
	})
}
