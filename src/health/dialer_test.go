package health

import (
	"context"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestNewDialerMarksSockets(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: SO_MARK requires CAP_NET_ADMIN")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := NewDialer(0xff, "lo").DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc, _ := conn.(*net.TCPConn).SyscallConn()
	var mark int
	var dev string
	rc.Control(func(fd uintptr) {
		mark, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK)
		dev, _ = unix.GetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE)
	})
	if mark != 0xff || dev != "lo" {
		t.Errorf("socket mark %#x device %q, want 0xff on lo", mark, dev)
	}
	if _, err := NewDialer(0, "no-such-dev0").DialContext(context.Background(), "tcp", ln.Addr().String()); err == nil {
		t.Error("binding to a missing device succeeded")
	}
}
