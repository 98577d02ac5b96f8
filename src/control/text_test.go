package control

import (
	"encoding/json"
	"strings"
	"testing"
)

// The long form puts the daemon's why line first (the sentence a person
// reads), then the state, the rest in alphabetical order.
func TestWriteTextWhyFirst(t *testing.T) {
	var b strings.Builder
	WriteText(&b, json.RawMessage(`{"counters":{"checks":1},"why":{"line":"Kill switch on"},"node":"Dallas","state":"storm_cooldown"}`))
	if want := "why: Kill switch on\nstate: storm_cooldown\nnode: Dallas\ncounters:\n  checks: 1\n"; b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
