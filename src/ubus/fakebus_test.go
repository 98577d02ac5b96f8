package ubus

import (
	"bufio"
	"context"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// wireEnd is the ubusd side of a connection in tests: it sends and receives
// whole messages.
type wireEnd struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

func (w *wireEnd) send(m *Message) {
	w.t.Helper()
	b, err := m.Encode()
	if err != nil {
		w.t.Fatalf("encoding test message: %v", err)
	}
	if _, err := w.nc.Write(b); err != nil {
		w.t.Fatalf("writing test message: %v", err)
	}
}

// recv returns the next message from our code, or nil after 5 s / on close.
func (w *wireEnd) recv() *Message {
	w.t.Helper()
	_ = w.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := readRawFrame(w.r)
	if err != nil {
		return nil
	}
	m, err := Decode(b)
	if err != nil {
		w.t.Fatalf("our code sent an undecodable message: %v", err)
	}
	return m
}

// socketPair returns a connected unix stream pair without touching the
// filesystem (buffered, unlike net.Pipe).
func socketPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = c
		t.Cleanup(func() { c.Close() })
	}
	return out[0], out[1]
}

// newPairConn returns our Conn wired to a wireEnd that already sent HELLO.
func newPairConn(t *testing.T, clientID uint32) (*Conn, *wireEnd) {
	t.Helper()
	a, b := socketPair(t)
	w := &wireEnd{t: t, nc: b, r: bufio.NewReader(b)}
	w.send(&Message{Type: MsgHello, Peer: clientID})
	c, err := NewConn(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, w
}

// answerAddObject plays ubusd's side of one ADD_OBJECT and returns it.
func (w *wireEnd) answerAddObject(objID, typeID uint32) *Message {
	w.t.Helper()
	m := w.recv()
	if m == nil || m.Type != MsgAddObject {
		w.t.Fatalf("want ADD_OBJECT, got %+v", m)
	}
	d := &Message{Type: MsgData, Seq: m.Seq}
	d.add(u32Attr(AttrObjID, objID))
	if typeID != 0 {
		d.add(u32Attr(AttrObjType, typeID))
	}
	w.send(d)
	w.send((&Message{Type: MsgStatus, Seq: m.Seq}).add(u32Attr(AttrStatus, 0)))
	return m
}

// miniUbusd is a small stand-in for ubusd on a real unix socket, enough for
// Service tests: HELLO, ADD_OBJECT, event send. restart() drops every client
// and the socket, like a ubusd restart.
type miniUbusd struct {
	t    *testing.T
	path string

	mu      sync.Mutex
	ln      net.Listener
	conns   []net.Conn
	nextID  uint32
	added   chan *Message // every ADD_OBJECT received
	events  chan Fields   // DATA of every event sent
	helloed chan uint32   // client id of every accepted connection
}

func startMiniUbusd(t *testing.T, path string) *miniUbusd {
	u := &miniUbusd{t: t, path: path, nextID: 0x1000,
		added: make(chan *Message, 16), events: make(chan Fields, 16), helloed: make(chan uint32, 16)}
	u.listen()
	t.Cleanup(u.stop)
	return u
}

func (u *miniUbusd) listen() {
	ln, err := net.Listen("unix", u.path)
	if err != nil {
		u.t.Errorf("mini ubusd: %v", err) // may run off the test goroutine
		return
	}
	u.mu.Lock()
	u.ln = ln
	u.mu.Unlock()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns = append(u.conns, nc)
			u.nextID++
			id := u.nextID
			u.mu.Unlock()
			go u.serve(nc, id)
		}
	}()
}

// stop closes the socket and every connection: ubusd is gone.
func (u *miniUbusd) stop() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ln != nil {
		u.ln.Close()
		u.ln = nil
	}
	for _, c := range u.conns {
		c.Close()
	}
	u.conns = nil
}

func (u *miniUbusd) serve(nc net.Conn, clientID uint32) {
	w := &wireEnd{t: u.t, nc: nc, r: bufio.NewReader(nc)}
	b, _ := (&Message{Type: MsgHello, Peer: clientID}).Encode()
	if _, err := nc.Write(b); err != nil {
		return
	}
	u.helloed <- clientID
	for {
		raw, err := readRawFrame(w.r)
		if err != nil {
			return
		}
		m, err := Decode(raw)
		if err != nil {
			return
		}
		st := StatusInvalidCommand
		switch {
		case m.Type == MsgAddObject:
			u.mu.Lock()
			u.nextID++
			id := u.nextID
			u.mu.Unlock()
			d := (&Message{Type: MsgData, Seq: m.Seq}).add(u32Attr(AttrObjID, id), u32Attr(AttrObjType, id+1))
			b, _ := d.Encode()
			nc.Write(b)
			u.added <- m
			st = StatusOK
		case m.Type == MsgInvoke && m.Peer == systemObjectEvent:
			if data, ok := m.Fields(AttrData); ok {
				if ev, ok := data.Get("data"); ok {
					u.events <- ev.Items
				}
			}
			st = StatusOK
		}
		s := (&Message{Type: MsgStatus, Seq: m.Seq, Peer: m.Peer}).add(u32Attr(AttrStatus, uint32(st)))
		b, _ := s.Encode()
		nc.Write(b)
	}
}
