package ubus

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// Publish sends nothing while ubusd says the object has no subscribers, and
// once it has some, one NOTIFY of the given type carrying {time, data}
// without asking for a reply (uhttpd's event stream prints it as is).
func TestPublishNotifiesSubscribersOnly(t *testing.T) {
	c, w := newPairConn(t, 0x1234abcd)
	obj := &Object{Name: ObjectName, Methods: SurflareMethods()}
	done := make(chan error, 1)
	go func() { done <- c.AddObject(context.Background(), obj) }()
	w.answerAddObject(testObjID, 0x7e570001)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC)
	line := map[string]string{"level": "INFO", "message": "VPN healthy: exit=US"}

	if err := c.Publish(obj, NotifyLog, at, map[string]string{"message": "nobody listens"}); err != nil {
		t.Fatalf("Publish without subscribers: %v", err)
	}
	// ubusd: the first subscriber came (ACTIVE 1)
	w.send((&Message{Type: MsgNotify}).add(u32Attr(AttrObjID, testObjID), u32Attr(AttrActive, 1)))
	deadline := time.Now().Add(5 * time.Second)
	for !c.HasSubscribers(obj) {
		if time.Now().After(deadline) {
			t.Fatal("ACTIVE 1 did not reach HasSubscribers")
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.Publish(obj, NotifyLog, at, line); err != nil {
		t.Fatal(err)
	}

	m := w.recv()
	if m == nil || m.Type != MsgNotify {
		t.Fatalf("want one NOTIFY, got %+v", m)
	}
	if typ, _ := m.String(AttrMethod); typ != NotifyLog {
		t.Errorf("notification type %q, want %q (the one sent without subscribers must not be on the wire)", typ, NotifyLog)
	}
	if id, _ := m.U32(AttrObjID); id != testObjID {
		t.Errorf("OBJID %08x, want %08x", id, testObjID)
	}
	if nr, _ := m.U32(AttrNoReply); nr != 1 {
		t.Error("the notification waits for replies: a slow subscriber would hold the daemon")
	}
	data, _ := m.Fields(AttrData)
	got, err := data.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"time":"2026-12-01T08:30:00Z","data":{"level":"INFO","message":"VPN healthy: exit=US"}}`
	if string(got) != want {
		t.Errorf("notification data %s, want %s", got, want)
	}
}

func TestServicePublishWithoutUbusd(t *testing.T) {
	svc := &Service{Socket: filepath.Join(t.TempDir(), "absent.sock")}
	err := svc.Publish(&Object{Name: ObjectName}, NotifyHealth, time.Now(), nil)
	if !errors.Is(err, ErrNotConnected) {
		t.Errorf("Publish without ubusd: %v, want ErrNotConnected", err)
	}
}
