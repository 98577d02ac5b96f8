package luciapp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// testNet is the test's network, shaped as the box's testnet.sh makes it:
// the box's namespace and a client's, joined by one veth (eth0 in both);
// the client is 192.168.1.2/24 on the box's LAN. Names are the test's
// own (prefix luci, a random part), so parallel runs never meet.
type testNet struct {
	Box, Client string
}

// clientAddr is the client's LAN address; the box's LAN is 192.168.1.1/24.
const clientAddr = "192.168.1.2"

func upTestNet(t *testing.T) *testNet {
	t.Helper()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(b)
	n := &testNet{Box: "luci-" + id + "-b", Client: "luci-" + id + "-c"}
	t.Cleanup(func() {
		for _, ns := range []string{n.Box, n.Client} {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil && !strings.Contains(string(out), "No such file") {
				t.Errorf("removing netns %s: %v: %s", ns, err, out)
			}
		}
	})
	vb, vc := "luci"+id+"a", "luci"+id+"b"
	for _, args := range [][]string{
		{"netns", "add", n.Box}, {"netns", "add", n.Client},
		{"-n", n.Box, "link", "set", "lo", "up"}, {"-n", n.Client, "link", "set", "lo", "up"},
		{"link", "add", vb, "netns", n.Box, "type", "veth", "peer", "name", vc, "netns", n.Client},
		{"-n", n.Box, "link", "set", vb, "name", "eth0"}, {"-n", n.Client, "link", "set", vc, "name", "eth0"},
		{"-n", n.Client, "addr", "add", clientAddr + "/24", "dev", "eth0"}, {"-n", n.Client, "link", "set", "eth0", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return n
}

// inNetNS runs fn on a thread switched into the named namespace. Sockets
// made there stay in it, whichever thread uses them later. A thread that
// cannot be switched back is left locked, so the runtime retires it.
func inNetNS(name string, fn func() error) error {
	runtime.LockOSThread()
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer self.Close()
	target, err := os.Open("/run/netns/" + name)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering netns %s: %w", name, err)
	}
	ferr := fn()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("leaving netns %s: %w", name, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

func listenIn(ns, addr string) (net.Listener, error) {
	var ln net.Listener
	err := inNetNS(ns, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln, err
}

func dialIn(ctx context.Context, ns, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNetNS(ns, func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
