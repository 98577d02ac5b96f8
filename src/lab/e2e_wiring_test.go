package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"surflare-watchdog/src/lab/fakes"
)

// End-to-end checks of the daemon's wiring into its surroundings: the
// chnroute refresher, the kill switch before the first LAN request, the
// keepalive clamp. They share upDaemon's conventions (e2e_test.go).

// The refresher downloads the lab's delegated file from the domestic web
// server (never a real registry), rewrites the list and re-applies the
// firewall: cn_direct in the kernel follows without a restart.
func TestDaemonRefreshesChnrouteInTheLab(t *testing.T) {
	l := upFull(t, Options{Clients: 1})
	ctx := context.Background()
	sets := append(append([]string(nil), e2eSets...), "surflare.paths.chnroute_refresh=3600")
	if err := WriteDaemonConfig(l, sets); err != nil {
		t.Fatal(err)
	}
	// A list older than the interval, narrower than the lab's: the refresh
	// is due at once and visibly changes the set.
	list := l.Path(dirConfig, "chnroute.txt")
	if err := os.WriteFile(list, []byte("198.19.0.0/17\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(list, old, old)
	startDaemonLogged(t, l)

	deadline := time.Now().Add(15 * time.Second)
	var set string
	for {
		set, _ = l.Exec(ctx, RoleRouter, "nft", "list", "set", "inet", "killswitch", "cn_direct4")
		if strings.Contains(set, DomesticNet.String()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cn_direct4 never took the refreshed list:\n%s", set)
		}
		time.Sleep(200 * time.Millisecond)
	}
	b, _ := os.ReadFile(list)
	if string(b) != DomesticNet.String()+"\n" {
		t.Errorf("chnroute file after the refresh: %q", b)
	}
	log := l.DaemonLog()
	for _, want := range []string{"chnroute updated", "chnroute applied"} {
		if !strings.Contains(log, want) {
			t.Errorf("daemon log lacks %q", want)
		}
	}
}

// startDaemonLogged starts the daemon with the config as it is, stops it
// at the end and shows its log when the test fails.
func startDaemonLogged(t *testing.T, l *Lab) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("E2E_LOG") != "" {
			t.Logf("daemon log:\n%s", tail(l.DaemonLog(), 80))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := l.StartDaemon(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l.DaemonRunning() {
			l.StopDaemon(context.Background())
		}
	})
}

// The daemon runs in the router's network namespace with the host's
// mounts, so its keepalive clamp is active in the lab as on a router: status
// shows 30/10/3, a connection through the tunnel is counted, and the
// proxy's socket to the relay reads back the clamped options. Its cgroup
// goes with a clean stop, and with the lab after a SIGKILL.
func TestDaemonKeepaliveClampInTheLab(t *testing.T) {
	l := upDaemon(t)
	ctx := context.Background()
	st, err := l.WaitDaemon(ctx, 30*time.Second, DaemonState.Healthy)
	if err != nil {
		t.Fatalf("%v\nstatus: %s", err, st.Raw)
	}
	ka := func(s DaemonState) map[string]any {
		m, _ := rawField(s.Raw, "daemon", "keepalive").(map[string]any)
		return m
	}
	k := ka(st)
	cg := l.DaemonCgroup()
	if k["active"] != true || k["idle_s"] != 30.0 || k["interval_s"] != 10.0 || k["count"] != 3.0 {
		t.Fatalf("keepalive clamp in status: %v, want active 30/10/3", k)
	}
	if cg == "" || k["cgroup"] != cg {
		t.Errorf("clamp cgroup %v, the lab expects %q", k["cgroup"], cg)
	}
	if _, err := os.Stat(cg); err != nil {
		t.Errorf("the clamp's cgroup: %v", err)
	}
	// The proxy is moved into the group by the daemon's proxy watch, a
	// moment after the connect (status may say healthy first).
	pids := l.ProcsByComm(RoleRouter, fakes.ProxyName)
	if len(pids) != 1 {
		t.Fatalf("proxies in the router: %v", pids)
	}
	deadline := time.Now().Add(3 * time.Second)
	for !inCgroup(cg, pids[0]) {
		if time.Now().After(deadline) {
			t.Fatalf("proxy %d never moved into %s", pids[0], cg)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, _ = l.DaemonStatus(ctx)
	before, _ := ka(st)["sockets"].(float64)

	// A LAN connection held open through the tunnel: the proxy opens (and
	// holds) one to a relay for it.
	cns, err := l.NS(l.clients[0].Role)
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	c, err := dialIn(dctx, cns, "tcp", netip.AddrPortFrom(IPEcho[0], 80).String())
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err = l.WaitDaemon(ctx, 5*time.Second, func(s DaemonState) bool {
		n, _ := ka(s)["sockets"].(float64)
		return n > before
	})
	if err != nil {
		t.Errorf("the clamp's socket counter did not move after a connect (was %v): %v", before, err)
	}
	t.Logf("clamp: %v", ka(st))

	socks, err := relaySocketKeepalive(pids[0])
	if err != nil {
		t.Fatal(err)
	}
	clamped := 0
	for _, s := range socks {
		t.Logf("proxy socket to relay %s: keepalive=%v idle=%ds intvl=%ds cnt=%d", s.peer, s.on, s.idle, s.intvl, s.cnt)
		// The fake proxy dials with Go's net.Dialer, which re-applies its own
		// keepalive (15 s, 15 s, 9) after connect; the clamp's cap keeps the
		// more eager idle and lowers the rest: 15/10/3. Unclamped: 15/15/9.
		if s.on && s.idle <= 30 && s.intvl == 10 && s.cnt == 3 {
			clamped++
		}
	}
	if clamped == 0 {
		t.Errorf("none of the proxy's %d relay sockets carries the clamp's keepalive", len(socks))
	}

	// A clean stop removes the group.
	if _, err := l.StopDaemon(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cg); !os.IsNotExist(err) {
		t.Errorf("cgroup %s after a clean stop: %v", cg, err)
	}
	// A killed daemon leaves it; the lab's teardown removes it.
	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	defer scancel()
	if _, err := l.StartDaemon(sctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WaitDaemon(ctx, 30*time.Second, func(s DaemonState) bool { return ka(s)["active"] == true }); err != nil {
		t.Fatal(err)
	}
	if err := l.KillDaemon(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cg); err != nil {
		t.Logf("cgroup already gone after SIGKILL (%v)", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("lab close: %v", err)
	}
	if _, err := os.Stat(cg); !os.IsNotExist(err) {
		t.Errorf("cgroup %s left behind by the lab: %v", cg, err)
	}
}

// inCgroup reports whether pid is in the cgroup2 group at path.
func inCgroup(path string, pid int) bool {
	b, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
	return slices.Contains(strings.Fields(string(b)), strconv.Itoa(pid))
}

// sockKeepalive is one socket's keepalive options, read from a duplicate.
type sockKeepalive struct {
	peer             netip.AddrPort
	on               bool
	idle, intvl, cnt int
}

// relaySocketKeepalive duplicates pid's TCP sockets connected to a relay
// port (pidfd_getfd) and reads their keepalive options.
func relaySocketKeepalive(pid int) ([]sockKeepalive, error) {
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(pfd)
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	var out []sockKeepalive
	for _, e := range ents {
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if !strings.HasPrefix(target, "socket:") {
			continue
		}
		n, _ := strconv.Atoi(e.Name())
		fd, err := unix.PidfdGetfd(pfd, n, 0)
		if err != nil {
			return nil, fmt.Errorf("pidfd_getfd %d/%d: %w", pid, n, err)
		}
		s, ok := keepaliveOf(fd)
		unix.Close(fd)
		if ok && s.peer.Port() == RelayPort {
			out = append(out, s)
		}
	}
	return out, nil
}

func keepaliveOf(fd int) (sockKeepalive, bool) {
	sa, err := unix.Getpeername(fd)
	if err != nil {
		return sockKeepalive{}, false
	}
	var s sockKeepalive
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		s.peer = netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		s.peer = netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	default:
		return sockKeepalive{}, false
	}
	on, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE)
	idle, err2 := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE)
	intvl, err3 := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPINTVL)
	cnt, err4 := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPCNT)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return sockKeepalive{}, false
	}
	s.on, s.idle, s.intvl, s.cnt = on == 1, idle, intvl, cnt
	return s, true
}

// Two labs on one host share the pid namespace: a daemon starting in one
// (its crash cleanup kills any stale proxy by name) must not touch the
// proxy of the other.
func TestDaemonLeavesAnotherLabsProxyAlone(t *testing.T) {
	a := upDaemon(t)
	ctx := context.Background()
	if _, err := a.WaitDaemon(ctx, 30*time.Second, DaemonState.Healthy); err != nil {
		t.Fatal(err)
	}
	proxyA := a.ProcsByComm(RoleRouter, fakes.ProxyName)
	if len(proxyA) != 1 {
		t.Fatalf("lab A proxies: %v", proxyA)
	}
	b := upDaemon(t)
	if _, err := b.WaitDaemon(ctx, 30*time.Second, DaemonState.Healthy); err != nil {
		t.Fatal(err)
	}
	if got := a.ProcsByComm(RoleRouter, fakes.ProxyName); !slices.Equal(got, proxyA) {
		t.Errorf("lab A's proxy %v after lab B's daemon started: %v", proxyA, got)
	}
	if strings.Contains(b.DaemonLog(), fmt.Sprintf("Killed stale proxy processes [%d]", proxyA[0])) {
		t.Errorf("lab B's daemon killed lab A's proxy:\n%s", tail(b.DaemonLog(), 20))
	}
	if name, err := exitOf(ctx, a); err != nil || name != "Dallas" {
		t.Errorf("lab A's client after lab B started: %q %v", name, err)
	}
}
