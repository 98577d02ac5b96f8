package control

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
)

// outcome is an action's answer, as the engine's Outcome is.
type outcome struct {
	OK      bool   `json:"ok"`
	Message string `json:"message"`
}

func (o outcome) Summary() string { return o.Message }
func (o outcome) Failed() bool    { return !o.OK }

func TestOutcomesAnswerInOneLine(t *testing.T) {
	path := start(t, HandlerFunc(func(ctx context.Context, req Request) (any, error) {
		if req.Args[ArgWait] != true {
			return map[string]any{"state": "connecting"}, nil
		}
		if req.Args["node"] == "Chicago" {
			return outcome{OK: true, Message: "rotated to Chicago in 2.1 s"}, nil
		}
		return outcome{Message: "could not switch to Miami (data plane not proven); back on Dallas"}, nil
	}))
	call := func(req Request) *Response {
		t.Helper()
		resp, err := Call(context.Background(), path, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	text := func(r *Response, asJSON bool) string {
		var b bytes.Buffer
		r.Write(&b, asJSON)
		return b.String()
	}

	ok := call(WithWait(Request{Cmd: CmdRotate, Args: map[string]any{"node": "Chicago"}}))
	if !ok.OK || ok.Message != "rotated to Chicago in 2.1 s" || text(ok, false) != "rotated to Chicago in 2.1 s\n" {
		t.Errorf("rotated: %+v prints %q", ok, text(ok, false))
	}
	failed := call(WithWait(Request{Cmd: CmdRotate, Args: map[string]any{"node": "Miami"}}))
	const why = "could not switch to Miami (data plane not proven); back on Dallas"
	if failed.OK || failed.Err() == nil || failed.Err().Error() != why || text(failed, false) != "" {
		t.Errorf("fell back: %+v prints %q (its error is the caller's to print)", failed, text(failed, false))
	}
	var o outcome
	if err := json.Unmarshal(failed.Data, &o); err != nil || o.Message != why || !bytes.Contains([]byte(text(failed, true)), []byte(`"ok": false`)) {
		t.Errorf("a failed outcome keeps its data for --json: %s (%v)", failed.Data, err)
	}
	// Not an action: no wait, and the data shown as text.
	if r := WithWait(Request{Cmd: CmdStatus}); r.Args != nil {
		t.Errorf("status asks to wait: %+v", r)
	}
	st := call(Request{Cmd: CmdRotate})
	if !st.OK || st.Message != "" || text(st, false) != "state: connecting\n" {
		t.Errorf("without wait: %+v prints %q", st, text(st, false))
	}
	if got := text(&Response{OK: true}, false); got != "ok\n" {
		t.Errorf("no data prints %q", got)
	}
}
