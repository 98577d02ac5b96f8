package control

import (
	"encoding/json"
	"strings"
	"testing"
)

// The long form puts the state and the daemon's why first, the rest in
// alphabetical order.
func TestWriteTextWhyAfterState(t *testing.T) {
	var b strings.Builder
	WriteText(&b, json.RawMessage(`{"counters":{"checks":1},"why":{"line":"Kill switch on"},"node":"Dallas","state":"storm_cooldown"}`))
	if want := "state: storm_cooldown\nwhy:\n  line: Kill switch on\nnode: Dallas\ncounters:\n  checks: 1\n"; b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
