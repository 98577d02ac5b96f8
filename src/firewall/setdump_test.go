package firewall

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// chnrouteSized is a cn_direct list the size of APNIC's CN list (about
// 8,500 IPv4 and 3,000 IPv6 prefixes), disjoint, inside lab ranges.
func chnrouteSized() (v4, v6 []netip.Prefix) {
	for i := range 8192 {
		v4 = append(v4, netip.MustParsePrefix(fmt.Sprintf("198.18.%d.%d/31", 128+(i*4)>>8, (i*4)&255)))
	}
	for i := range 3000 {
		v6 = append(v6, netip.MustParsePrefix(fmt.Sprintf("fd00:cafe:%x::/48", i*2)))
	}
	return v4, v6
}

// The lean reader sees every set of ours exactly as the library does —
// same keys, same interval ends — with a chnroute-sized cn_direct, IPv6
// and a MAC set; and Apply, which now diffs with it, still finds nothing
// to change the second time and repairs an element deleted behind its back.
func TestDumpSetKeysMatchesTheLibrary(t *testing.T) {
	ctx := context.Background()
	ns := newNS(t, "dump")
	s := labSpec()
	s.IPv6 = IPv6Proxy
	s.CNDirect4, s.CNDirect6 = chnrouteSized()
	s.Bypass = []Device{{Name: "tv", MAC: mustMAC("02:00:00:00:01:0b")}}
	fw := New(WithNetNS(ns.fd()))
	if _, err := fw.Apply(ctx, s); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	c, err := fw.conn()
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseLasting()
	tables, err := c.ListTables()
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		k   string
		end bool
	}
	sets, big := 0, 0
	libCount := map[string]int{} // "inet killswitch cn_direct4" -> elements
	for _, tbl := range tables {
		tsets, err := c.GetSets(tbl)
		if err != nil {
			t.Fatal(err)
		}
		for _, set := range tsets {
			lib, err := c.GetSetElements(set)
			if err != nil {
				t.Fatal(err)
			}
			ours, err := dumpSetKeys(c, set)
			if err != nil {
				t.Fatalf("%s %s: %v", tbl.Name, set.Name, err)
			}
			var want, got []key
			for _, e := range lib {
				want = append(want, key{string(e.Key), e.IntervalEnd})
			}
			for _, e := range ours {
				got = append(got, key{string(e.key), e.end})
			}
			cmp := func(a, b key) int {
				if a.k != b.k {
					if a.k < b.k {
						return -1
					}
					return 1
				}
				if a.end == b.end {
					return 0
				}
				if a.end {
					return 1
				}
				return -1
			}
			slices.SortFunc(want, cmp)
			slices.SortFunc(got, cmp)
			if !slices.Equal(want, got) {
				t.Fatalf("%s %s: dumpSetKeys read %d elements, the library %d (or other keys)", tbl.Name, set.Name, len(got), len(want))
			}
			sets++
			libCount[tableKey(tbl.Family, tbl.Name)+" "+set.Name] = len(lib)
			if len(want) >= 2*3000 {
				big++
			}
		}
	}
	if sets < 10 || big < 3 {
		t.Fatalf("compared %d sets, %d chnroute-sized: the spec did not install what this test is about", sets, big)
	}
	// Status counts the elements with the same reader.
	counted := 0
	for _, ts := range fw.TableSizes(ctx) {
		for name, n := range ts.Sets {
			if want, ok := libCount[ts.Name+" "+name]; ok && n != want {
				t.Errorf("TableSizes: %s %s has %d elements, the library counts %d", ts.Name, name, n, want)
			}
			counted++
		}
	}
	if counted != sets {
		t.Errorf("TableSizes listed %d sets, want %d", counted, sets)
	}
	if ch, err := fw.Apply(ctx, s); err != nil || !ch.Empty() {
		t.Fatalf("second Apply = %v, %v; want no changes", ch, err)
	}
	ns.nft("delete", "element", "inet", TableKillSwitch, "cn_direct4", "{ 198.18.200.0/31 }")
	ch, err := fw.Apply(ctx, s)
	if err != nil || ch.Empty() {
		t.Fatalf("Apply after an element was deleted = %v, %v; want the set rewritten", ch, err)
	}
	if out := ns.nft("list", "set", "inet", TableKillSwitch, "cn_direct4"); !strings.Contains(out, "198.18.200.0/31") {
		t.Fatalf("the deleted element is not back:\n%.400s", out)
	}
}

// A truncated or garbled reply ends the walk; it never reads past the
// buffer.
func TestAttrsOfStopsAtMalformedHeaders(t *testing.T) {
	for _, b := range [][]byte{
		nil,
		{8, 0},                         // short header
		{200, 0, 1, 0, 1, 2},           // length past the end
		{2, 0, 1, 0, 9, 9, 9, 9},       // length below the header
		{8, 0, 1, 0, 1, 2, 3, 4, 8, 0}, // one good attribute, then a torn one
	} {
		n := 0
		for _, v := range attrsOf(b) {
			if len(v) != 4 {
				t.Fatalf("%v: payload %v", b, v)
			}
			n++
		}
		if n > 1 {
			t.Fatalf("%v: %d attributes", b, n)
		}
	}
	if _, ok := elemKey([]byte{4, 0, 1, 0}); ok {
		t.Fatal("an element without a key value decoded")
	}
}
