package daemon

import (
	"os/exec"
	"slices"
	"testing"

	"surflare-watchdog/src/detectors/fastsignal"
)

// The proxy cache answers from the tracker while the tracked proxy lives,
// and hands the question back to a real scan as soon as it is gone — so a
// health check never reports a dead proxy alive, and the connection
// killer never mistakes a new proxy's sockets for the old one's.
func TestProxyCacheFollowsTheProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("cannot start sleep:", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	finds := 0
	tr, err := fastsignal.NewProxyTracker(fastsignal.TrackerOptions{Find: func() ([]int, error) {
		finds++
		return []int{pid}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := &proxyCache{}
	if _, known := c.pids("surflare-proxy"); known {
		t.Fatal("an empty cache claims to know the proxy")
	}
	c.v.Store(&proxyCacheEntry{comm: "surflare-proxy", t: tr})
	for range 10 {
		pids, known := c.pids("surflare-proxy")
		if !known || !slices.Equal(pids, []int{pid}) {
			t.Fatalf("pids = %v, %v; want [%d] from the cache", pids, known, pid)
		}
	}
	if finds != 1 {
		t.Fatalf("%d scans for 10 questions, want 1", finds)
	}
	if alive, known := c.alive("surflare-proxy"); !alive || !known {
		t.Fatalf("alive = %v, %v for a running proxy", alive, known)
	}
	if _, known := c.pids("other-name"); known {
		t.Fatal("the cache answered for another process name")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, known := c.pids("surflare-proxy"); known {
		t.Fatal("a dead proxy is still answered from the cache")
	}
	if _, known := c.alive("surflare-proxy"); known {
		t.Fatal("a dead proxy's liveness was not left to a real scan")
	}
}
