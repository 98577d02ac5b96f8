package nflog

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// testGroup is an NFLOG group no one else in a fresh namespace uses.
const testGroup = 7301

// inFreshNS runs fn on a locked thread inside a new network namespace
// with lo up, and returns to the original namespace afterwards. The
// namespace disappears with its last socket.
func inFreshNS(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and an nft rule")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs the nft CLI to install the test's log rule")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine, namespace and all
		orig, err := netns.Get()
		if err != nil {
			t.Error(err)
			return
		}
		defer orig.Close()
		ns, err := netns.New()
		if err != nil {
			t.Error(err)
			return
		}
		defer ns.Close()
		if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
			t.Errorf("lo up: %v %s", err, out)
			return
		}
		fn()
	}()
	<-done
}

func nft(t *testing.T, script string) bool {
	t.Helper()
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("nft: %v\n%s", err, out)
		return false
	}
	return true
}

// dialRefused sends n SYNs to a closed port on lo (each is refused at once).
func dialRefused(n int, port string) {
	for range n {
		c, err := net.DialTimeout("tcp4", "127.0.0.1:"+port, time.Second)
		if err == nil {
			c.Close()
		}
	}
}

// Packets a rule logs to the group wake C and are counted; packets it
// does not log do not; a second subscriber to the same group is refused;
// cancelling the context closes C.
func TestSubscribeWakesOnLoggedPackets(t *testing.T) {
	inFreshNS(t, func() {
		if !nft(t, `table inet nflogtest {
			chain output {
				type filter hook output priority 0; policy accept;
				tcp dport 7999 tcp flags syn log group 7301
			}
		}`) {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s, err := Subscribe(ctx, testGroup)
		if err != nil {
			t.Errorf("subscribe: %v", err)
			return
		}
		defer s.Close()
		if _, err := Subscribe(ctx, testGroup); !errors.Is(err, unix.EPERM) {
			t.Errorf("second subscriber: err %v, want EPERM (the kernel's answer for a group bound by another socket)", err)
		}

		dialRefused(5, "7998") // not logged
		select {
		case <-s.C():
			t.Errorf("woken by packets the rule does not log (%d events)", s.Events())
			return
		case <-time.After(100 * time.Millisecond):
		}
		start := time.Now()
		dialRefused(20, "7999")
		select {
		case <-s.C():
		case <-time.After(2 * time.Second):
			t.Error("no wake-up for logged packets")
			return
		}
		t.Logf("first wake-up %v after the first SYN", time.Since(start))
		deadline := time.Now().Add(2 * time.Second)
		for s.Events() < 20 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if s.Events() != 20 {
			t.Errorf("events = %d, want 20 (one per logged SYN)", s.Events())
		}
		cancel()
		select {
		case _, ok := <-s.C():
			for ok {
				_, ok = <-s.C()
			}
		case <-time.After(2 * time.Second):
			t.Error("C not closed after the context ended")
		}
	})
}

// Without the kernel side (group bound by nobody, rule absent), Subscribe
// still works: it is the rule that produces events, not the binding.
func TestSubscribeWithoutRuleIsQuiet(t *testing.T) {
	inFreshNS(t, func() {
		s, err := Subscribe(context.Background(), testGroup)
		if err != nil {
			t.Errorf("subscribe: %v", err)
			return
		}
		dialRefused(5, "7999")
		select {
		case <-s.C():
			t.Errorf("woken with no rule")
		case <-time.After(50 * time.Millisecond):
		}
		s.Close()
		if _, ok := <-s.C(); ok {
			t.Error("C still open after Close")
		}
	})
}
