package firewall

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Test namespaces are named swfwt-<pid>-<n> so `ip netns exec` (for the nft
// CLI) can enter them; all are deleted when the test ends, and leftovers of
// dead test processes are swept on start.
const nsPrefix = "swfwt-"

// flushNSPrefix names the namespaces of the routing layer's flush tests.
const flushNSPrefix = "flush-"

var nsSeq atomic.Int32

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and nftables tables")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs the nft CLI to check the kernel's view")
	}
}

func sweepStaleNamespaces(prefix string) {
	names, _ := os.ReadDir("/var/run/netns")
	for _, n := range names {
		rest, ok := strings.CutPrefix(n.Name(), prefix)
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = netns.DeleteNamed(n.Name())
		}
	}
}

// testNS is one named namespace made by the test.
type testNS struct {
	t    testing.TB
	name string
	h    netns.NsHandle
	nl   *netlink.Handle
}

func newNS(t testing.TB, role string) *testNS {
	t.Helper()
	return newNSPrefix(t, nsPrefix, role)
}

// newNSPrefix is newNS with another name prefix (<prefix><pid>-<n>-<role>).
func newNSPrefix(t testing.TB, prefix, role string) *testNS {
	t.Helper()
	needRoot(t)
	if nsSeq.Load() == 0 {
		sweepStaleNamespaces(nsPrefix)
		sweepStaleNamespaces(flushNSPrefix)
	}
	name := fmt.Sprintf("%s%d-%d-%s", prefix, os.Getpid(), nsSeq.Add(1), role)
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	h, err := netns.NewNamed(name)
	if serr := netns.Set(orig); serr != nil {
		panic("cannot return to the original namespace: " + serr.Error())
	}
	orig.Close()
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	n := &testNS{t: t, name: name, h: h}
	t.Cleanup(func() {
		if n.nl != nil {
			n.nl.Close()
		}
		h.Close()
		_ = netns.DeleteNamed(name)
	})
	n.nl, err = netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	n.linkUp("lo")
	// No duplicate address detection: IPv6 must work the moment links are up.
	n.sysctl("net.ipv6.conf.default.accept_dad", "0")
	n.sysctl("net.ipv6.conf.all.accept_dad", "0")
	return n
}

func (n *testNS) fd() int { return int(n.h) }

func (n *testNS) linkUp(name string) {
	n.t.Helper()
	l, err := n.nl.LinkByName(name)
	if err != nil {
		n.t.Fatalf("%s: %s: %v", n.name, name, err)
	}
	if err := n.nl.LinkSetUp(l); err != nil {
		n.t.Fatal(err)
	}
}

func (n *testNS) addAddr(dev, cidr string) {
	n.t.Helper()
	l, err := n.nl.LinkByName(dev)
	if err != nil {
		n.t.Fatal(err)
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		n.t.Fatal(err)
	}
	if strings.Contains(cidr, ":") {
		a.Flags = unix.IFA_F_NODAD // usable at once
	}
	if err := n.nl.AddrAdd(l, a); err != nil {
		n.t.Fatalf("%s: addr %s on %s: %v", n.name, cidr, dev, err)
	}
}

func (n *testNS) route(dst, gw string) {
	n.t.Helper()
	_, d, err := net.ParseCIDR(dst)
	if err != nil {
		n.t.Fatal(err)
	}
	if err := n.nl.RouteAdd(&netlink.Route{Dst: d, Gw: net.ParseIP(gw)}); err != nil {
		n.t.Fatalf("%s: route %s via %s: %v", n.name, dst, gw, err)
	}
}

func (n *testNS) sysctl(path, val string) {
	n.t.Helper()
	n.run(func() {
		if err := os.WriteFile("/proc/sys/"+strings.ReplaceAll(path, ".", "/"), []byte(val), 0o644); err != nil {
			n.t.Errorf("sysctl %s: %v", path, err)
		}
	})
}

// run calls fn on a thread inside the namespace; sockets it opens live there.
func (n *testNS) run(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // not unlocked: the thread exits with the goroutine
		if err := netns.Set(n.h); err != nil {
			n.t.Errorf("entering %s: %v", n.name, err)
			return
		}
		fn()
	}()
	<-done
}

// nft runs the nft CLI in the namespace.
func (n *testNS) nft(args ...string) string {
	n.t.Helper()
	out, err := n.nftErr(args...)
	if err != nil {
		n.t.Fatalf("nft %s in %s: %v\n%s", strings.Join(args, " "), n.name, err, out)
	}
	return out
}

func (n *testNS) nftErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.name, "nft"}, args...)...).CombinedOutput()
	return string(out), err
}

// veth joins two namespaces with a veth pair.
func veth(t testing.TB, a *testNS, aName string, b *testNS, bName string, aMAC string) {
	t.Helper()
	la := netlink.NewLinkAttrs()
	la.Name = aName
	if aMAC != "" {
		mac, err := net.ParseMAC(aMAC)
		if err != nil {
			t.Fatal(err)
		}
		la.HardwareAddr = mac
	}
	v := &netlink.Veth{LinkAttrs: la, PeerName: bName, PeerNamespace: netlink.NsFd(b.fd())}
	if err := a.nl.LinkAdd(v); err != nil {
		t.Fatalf("veth %s/%s: %v", aName, bName, err)
	}
	a.linkUp(aName)
	b.linkUp(bName)
}
