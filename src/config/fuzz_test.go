package config

import "testing"

// FuzzParse: no input makes Parse panic, and whatever it accepts is written
// by Format in a form that reads back to the same config.
func FuzzParse(f *testing.F) {
	// Small seeds: the fuzzer minimises every new input, and big files make
	// that take most of a short run.
	f.Add([]byte("config surflare 'main'\n\toption check_interval '90s'\n\tlist candidate 'Dallas'\n"))
	f.Add([]byte("config loghealth\n\toption tail '2M'\n\toption pattern 'x(?P<node>a) (?P<transit>b)'\n"))
	f.Add([]byte("config probe\n\toption kind 'search'\n\toption url 'http://198.18.30.21/'\n"))
	f.Add([]byte("config bypass 'tv'\n\toption mac '02:00:00:00:00:0a'\n\tlist ip '198.18.1.5'\n"))
	f.Add([]byte("config web 'web'\n\toption listen 'fd00:1::1'\n\toption port '9099'\nconfig dns\n\tlist blocked_doh ''\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, _, err := Parse("fuzz", data)
		if err != nil {
			return
		}
		back, _, err := Parse("formatted", Format(c))
		if err != nil {
			t.Fatalf("Format output does not parse: %v\n%s", err, Format(c))
		}
		if !Equal(back, c) {
			t.Fatalf("round trip changed the config:\n%s\nvs\n%s", Format(c), Format(back))
		}
	})
}
