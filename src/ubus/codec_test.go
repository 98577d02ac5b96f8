package ubus

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Every message the real ubusd and libubus exchanged decodes without error
// and encodes back to the very same bytes.
func TestCodecRoundTripsEveryFixtureMessage(t *testing.T) {
	total := 0
	for _, name := range allTraces(t) {
		for i, l := range loadTrace(t, name) {
			m, err := Decode(l.msg)
			if err != nil {
				t.Errorf("%s #%d: decode: %v", name, i, err)
				continue
			}
			got, err := m.Encode()
			if err != nil {
				t.Errorf("%s #%d: encode: %v", name, i, err)
				continue
			}
			if !bytes.Equal(got, l.msg) {
				t.Errorf("%s #%d: re-encoded bytes differ\n got %x\nwant %x", name, i, got, l.msg)
			}
			total++
		}
	}
	t.Logf("%d fixture messages round-tripped", total)
}

// The decoded values are the ones the ubus CLI printed for call_status.
func TestCodecDecodesStatusReplyAsCLIShowsIt(t *testing.T) {
	tr := loadTrace(t, "call_status.trace")
	m, err := Decode(tr[5].msg) // S>C DATA with the status reply
	if err != nil {
		t.Fatal(err)
	}
	if m.Type != MsgData || m.Seq != 2 {
		t.Fatalf("got %s seq %d, want DATA seq 2", m.Type, m.Seq)
	}
	data, ok := m.Fields(AttrData)
	if !ok {
		t.Fatal("no DATA attribute")
	}
	got, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"state":"up","node":"Paris","uptime":42,"healthy":true,"peers":["Dallas","Tokyo"]}`
	if string(got) != want {
		t.Errorf("DATA as JSON:\n got %s\nwant %s", got, want)
	}
	if v, _ := data.Get("uptime"); v.Type != TypeInt32 {
		t.Errorf("uptime type %s, want int32", v.Type)
	}
}
