package route

import (
	"context"
	"fmt"
	"net"
	"testing"
)

// Listening sees a listener of either family on its port, in the dump's
// namespace only, and nothing for a port that only has established
// connections (the client's ephemeral end) or none at all. Asked twice
// with a dump that spans several datagrams, the second answer is as right
// as the first: a dump cut short by its answer leaves nothing on the
// socket for the next question to read.
func TestSockDiagListening(t *testing.T) {
	ctx := context.Background()
	ns, _ := freshNS(t)
	d, err := OpenSockDiag(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	var ln4, ln6 net.Listener
	var conns []net.Conn
	var many []net.Listener
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
		// Many listeners: the dump spans several netlink datagrams.
		for i := range 400 {
			if l, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", 20000+i)); err == nil {
				many = append(many, l)
			}
		}
		for range 200 {
			if c, err := net.Dial("tcp4", "127.0.0.1:10800"); err == nil {
				conns = append(conns, c)
			}
		}
	})
	if ln4 == nil || ln6 == nil || len(conns) < 200 || len(many) < 400 {
		t.FailNow()
	}
	for _, l := range many {
		defer l.Close()
	}
	defer ln4.Close()
	defer ln6.Close()
	for _, c := range conns {
		defer c.Close()
	}
	// The host namespace's listener must not show.
	host, err := net.Listen("tcp4", "127.0.0.1:10802")
	if err != nil {
		t.Skipf("host port 10802 taken: %v", err)
	}
	defer host.Close()

	ephemeral := uint16(conns[0].LocalAddr().(*net.TCPAddr).Port)
	for round := range 2 {
		for port, want := range map[uint16]bool{10800: true, 10801: true, 20000: true, 20399: true, 10802: false, 10803: false, ephemeral: false} {
			got, err := d.Listening(ctx, port)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("round %d: Listening(%d) = %v, want %v", round, port, got, want)
			}
		}
	}
	// The owned sockets' dump after the listener questions still sees the
	// namespace's connections, both ends.
	owned, err := d.OwnedTCPSockets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(owned) < 2*len(conns) {
		t.Errorf("OwnedTCPSockets after Listening: %d sockets, want at least %d", len(owned), 2*len(conns))
	}
	d.Close()
	if _, err := d.Listening(ctx, 10800); err == nil {
		t.Error("Listening on a closed SockDiag: no error")
	}
}
