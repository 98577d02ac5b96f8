package route

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// OwnedTCPSockets is AllTCPSockets without what no process holds —
// listeners, TIME_WAIT — filtered by the kernel; every socket it keeps has
// the same addresses, state, inode and tcp_info as the library's dump, in
// the handle's namespace only, both families.
func TestOwnedTCPSocketsIsAllTCPSocketsWithoutListenersAndTimeWait(t *testing.T) {
	ctx := context.Background()
	ns, h := freshNS(t)
	d, err := OpenSockDiag(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	var ln4, ln6 net.Listener
	var live, live6, gone net.Conn
	inNS(t, ns, func() {
		var err error
		if ln4, err = net.Listen("tcp4", "127.0.0.1:10800"); err != nil {
			t.Error(err)
			return
		}
		if ln6, err = net.Listen("tcp6", "[::1]:10801"); err != nil {
			t.Error(err)
			return
		}
		live, _ = net.Dial("tcp4", "127.0.0.1:10800")
		gone, _ = net.Dial("tcp4", "127.0.0.1:10800")
		live6, _ = net.Dial("tcp6", "[::1]:10801")
	})
	if ln4 == nil || ln6 == nil || live == nil || gone == nil || live6 == nil {
		t.FailNow()
	}
	defer ln4.Close()
	defer ln6.Close()
	defer live.Close()
	defer live6.Close()
	srvLive, _ := ln4.Accept()
	defer srvLive.Close()
	srvGone, _ := ln4.Accept()
	srv6, _ := ln6.Accept()
	defer srv6.Close()
	// The client closes first: its end goes to TIME_WAIT once the server's
	// FIN comes back.
	gone.Close()
	io.Copy(io.Discard, srvGone)
	srvGone.Close()

	// The host namespace's sockets must not show.
	host, _ := net.Listen("tcp4", "127.0.0.1:0")
	defer host.Close()
	hc, _ := net.Dial("tcp4", host.Addr().String())
	defer hc.Close()

	var all []Socket
	timeWait := false
	deadline := time.Now().Add(5 * time.Second)
	for !timeWait && time.Now().Before(deadline) {
		if all, err = h.AllTCPSockets(ctx); err != nil {
			t.Fatal(err)
		}
		for _, s := range all {
			timeWait = timeWait || s.State == tcpTimeWait
		}
		if !timeWait {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !timeWait {
		t.Fatalf("no TIME_WAIT socket to leave out: %+v", all)
	}
	owned, err := d.OwnedTCPSockets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		l, r  string
		state uint8
		inode uint32
	}
	want := map[key]Socket{}
	for _, s := range all {
		if s.State != tcpListen && s.State != tcpTimeWait && s.State != tcpSynRecv {
			want[key{s.Local.String(), s.Remote.String(), s.State, s.Inode}] = s
		}
	}
	if len(want) != 4 { // both ends of the two open connections
		t.Fatalf("the library's dump has %d live sockets, want 4: %+v", len(want), all)
	}
	got := map[key]bool{}
	for _, s := range owned {
		k := key{s.Local.String(), s.Remote.String(), s.State, s.Inode}
		w, ok := want[k]
		if !ok {
			t.Errorf("OwnedTCPSockets has %+v, not a live socket of the namespace", s)
			continue
		}
		got[k] = true
		if s.Inode == 0 || s.Info == nil || w.Info == nil {
			t.Errorf("%v: inode %d, tcp_info %v (library: %v)", k, s.Inode, s.Info != nil, w.Info != nil)
			continue
		}
		if s.Info.State != w.Info.State || s.Info.Snd_mss != w.Info.Snd_mss || s.Info.Snd_cwnd != w.Info.Snd_cwnd ||
			s.Info.Rto != w.Info.Rto || s.Info.Advmss != w.Info.Advmss || s.Info.Unacked != w.Info.Unacked {
			t.Errorf("%v: tcp_info %+v, library %+v", k, *s.Info, *w.Info)
		}
	}
	for k := range want {
		if !got[k] {
			t.Errorf("OwnedTCPSockets misses %v", k)
		}
	}
}
