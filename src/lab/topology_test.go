package lab

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the lab creates network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip (ip netns exec)")
	}
}

// upBare brings up a lab without binaries or servers and registers cleanup.
func upBare(t *testing.T) *Lab {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := Up(ctx, Options{NoServers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// serveEcho listens inside the internet namespace on addr and answers each
// connection with the peer's address, a stand-in for the IP-echo host.
func serveEcho(t *testing.T, l *Lab, addr string) {
	t.Helper()
	ln, err := listenIn(l.ns[RoleInternet], "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			io.WriteString(c, host)
			c.Close()
		}
	}()
}

// readFrom dials addr from a role's namespace and returns what it says.
func readFrom(l *Lab, role, addr string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := dialIn(ctx, l.ns[role], "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(c)
	return string(b), err
}

func TestUpDownLeavesNothingBehind(t *testing.T) {
	needRoot(t)
	before := links(t)
	l := upBare(t)
	t.Logf("up took %s", l.UpTime)
	if l.UpTime > 2*time.Second {
		t.Errorf("up took %s, want < 2s", l.UpTime)
	}
	if got := len(listNamed(l.Prefix + "-")); got != 4 {
		t.Fatalf("want 4 namespaces (2 clients, router, internet), got %d", got)
	}
	// Something running inside a namespace (like a detached proxy) must not
	// keep it alive.
	sleeper := l.Command(RoleRouter, "sleep", "300")
	sleeper.SysProcAttr.Setsid, sleeper.SysProcAttr.Setpgid = true, false
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	go sleeper.Wait()
	for i := 0; len(l.ProcsByComm(RoleRouter, "sleep")) == 0; i++ {
		if i > 200 {
			t.Fatal("sleep never showed up in the router namespace")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := listNamed(l.Prefix); len(n) != 0 {
		t.Errorf("namespaces left: %v", n)
	}
	if _, err := os.Stat(l.Dir); !os.IsNotExist(err) {
		t.Errorf("lab dir left: %v", err)
	}
	if after := links(t); after != before {
		t.Errorf("host links changed:\nbefore %s\nafter  %s", before, after)
	}
	// Gone or a zombie waiting for its Wait: either way no longer running.
	if _, err := procStart(sleeper.Process.Pid); err == nil {
		t.Errorf("process in the router namespace survived Close")
	}
}

func links(t *testing.T) string {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	return strings.Join(names, ",")
}

func TestClientsReachInternetThroughNAT(t *testing.T) {
	needRoot(t)
	l := upBare(t)
	serveEcho(t, l, IPEcho[0].String()+":80")
	serveEcho(t, l, "["+Internet6.String()+"]:80")
	for i, c := range l.Clients() {
		got, err := readFrom(l, c.Role, IPEcho[0].String()+":80", 2*time.Second)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		if got != WANRouter.String() {
			t.Errorf("client %d: echo saw %q, want the masqueraded WAN address %s", i, got, WANRouter)
		}
		got6, err := readFrom(l, c.Role, "["+Internet6.String()+"]:80", 2*time.Second)
		if err != nil {
			t.Fatalf("client %d v6: %v", i, err)
		}
		if got6 != c.Addr6.String() {
			t.Errorf("client %d: v6 echo saw %q, want the routed client address %s", i, got6, c.Addr6)
		}
	}
	lc, err := l.Leaks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if lc.TCP4 == 0 || lc.TCP6 == 0 {
		t.Errorf("direct fetches must count as leaks, got %s", lc)
	}
	// Distinct MACs, as configured.
	out, err := l.Exec(context.Background(), RoleLAN+"2", "ip", "-o", "link", "show", IfClient)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, ClientMAC(1)) {
		t.Errorf("client 1 MAC: want %s in %q", ClientMAC(1), out)
	}
	if _, err := l.ResetLeaks(context.Background()); err != nil {
		t.Fatal(err)
	}
	if lc, _ := l.Leaks(context.Background()); lc.Total() != 0 {
		t.Errorf("after reset: %s", lc)
	}
}

func TestKernelFaults(t *testing.T) {
	needRoot(t)
	l := upBare(t)
	ctx := context.Background()
	echo := IPEcho[0].String() + ":80"
	node := Nodes[2].Addr.String() + ":80"
	serveEcho(t, l, echo)
	serveEcho(t, l, node)
	fetch := func(addr string) error {
		_, err := readFrom(l, RoleLAN, addr, 700*time.Millisecond)
		return err
	}
	steps := []struct {
		name     string
		args     []string
		addr     string
		failWhen bool // fetch of addr fails while the fault is on
	}{
		{FaultNodeBlackhole, []string{"chicago"}, node, true},
		{FaultNodeBlackhole, []string{"chicago"}, echo, false}, // only that node
		{FaultLoss, []string{"100"}, echo, true},
		{FaultWANDown, nil, echo, true},
	}
	for _, s := range steps {
		if err := fetch(s.addr); err != nil {
			t.Fatalf("%s: before the fault: %v", s.name, err)
		}
		if err := l.Fault(ctx, s.name, true, s.args...); err != nil {
			t.Fatal(err)
		}
		if err := fetch(s.addr); (err != nil) != s.failWhen {
			t.Errorf("%s on: fetch %s err=%v, want failure=%v", s.name, s.addr, err, s.failWhen)
		}
		if err := l.Fault(ctx, s.name, false, s.args...); err != nil {
			t.Fatal(err)
		}
		// A link brought back up takes a moment (carrier, neighbour
		// resolution), longer on a loaded machine: the fault must clear,
		// not clear within one 700 ms fetch.
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; {
			if err = fetch(s.addr); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Errorf("%s off: fetch %s: %v", s.name, s.addr, err)
		}
	}
	lc, _ := l.Leaks(ctx)
	if lc.Blackholed == 0 || lc.Lost == 0 {
		t.Errorf("black hole and loss should be counted: %s", lc)
	}
	// table-wipe removes the router's tables but restores the fw4 stand-in.
	if _, err := l.Exec(ctx, RoleRouter, "nft", "add", "table", "inet", "surflare"); err != nil {
		t.Skipf("nft CLI unusable: %v", err)
	}
	if err := l.Fault(ctx, FaultTableWipe, true); err != nil {
		t.Fatal(err)
	}
	out, _ := l.Exec(ctx, RoleRouter, "nft", "list", "tables")
	if strings.Contains(out, "surflare") || !strings.Contains(out, tableFW4) {
		t.Errorf("after table-wipe: %q", out)
	}
	if err := fetch(echo); err != nil {
		t.Errorf("NAT after table-wipe: %v", err)
	}
	log := l.FaultLog()
	if len(log) != 2*len(steps)+1 || log[0].Name != FaultNodeBlackhole || log[0].Time.IsZero() {
		t.Errorf("fault log: %+v", log)
	}
}

func TestParallelLabsDoNotCollide(t *testing.T) {
	needRoot(t)
	var wg sync.WaitGroup
	labs := make([]*Lab, 3)
	errs := make([]error, 3)
	for i := range labs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			labs[i], errs[i] = Up(context.Background(), Options{NoServers: true})
		}()
	}
	wg.Wait()
	for i, l := range labs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		t.Cleanup(func() { l.Close() })
	}
	// Each lab's echo host answers only in its own internet.
	for i, l := range labs {
		serveEcho(t, l, IPEcho[1].String()+":80")
		_ = i
	}
	for i, l := range labs {
		if err := l.Fault(context.Background(), FaultWANDown, i == 0); err != nil {
			t.Fatal(err)
		}
	}
	for i, l := range labs {
		_, err := readFrom(l, RoleLAN, IPEcho[1].String()+":80", 700*time.Millisecond)
		if (err != nil) != (i == 0) {
			t.Errorf("lab %d (%s): err=%v; only lab 0 has its WAN down", i, l.Prefix, err)
		}
	}
}

func TestSweepRemovesOnlyDeadOwners(t *testing.T) {
	needRoot(t)
	live := upBare(t)
	dead, err := Up(context.Background(), Options{NoServers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	// Pretend dead's owner crashed: a pid that has exited.
	cmd := exec.Command("true")
	cmd.Run()
	os.WriteFile(filepath.Join(dead.Dir, ownerFile), fmt.Appendf(nil, "%d 1\n", cmd.Process.Pid), 0o644)
	Sweep(nil)
	if len(listNamed(dead.Prefix+"-")) != 0 {
		t.Errorf("stale lab %s not swept", dead.Prefix)
	}
	if _, err := os.Stat(dead.Dir); !os.IsNotExist(err) {
		t.Errorf("stale lab dir not swept")
	}
	if len(listNamed(live.Prefix+"-")) != 4 {
		t.Errorf("live lab %s was swept", live.Prefix)
	}
}

// A lab whose directory is not under our $TMPDIR (a run with another
// TMPDIR) but whose namespaces hold processes is live: Sweep leaves it.
// Once nothing runs in it, it is stale and goes.
func TestSweepSparesALiveLabOfAnotherTMPDIR(t *testing.T) {
	needRoot(t)
	other := upBare(t)
	sleeper := exec.Command("ip", "netns", "exec", other.NSName(RoleRouter), "sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	moved := other.Dir + ".elsewhere"
	if err := os.Rename(other.Dir, moved); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(moved) })
	// ip netns exec has joined the namespace once sleep runs in it
	for deadline := time.Now().Add(5 * time.Second); !nsInUse(other.Prefix) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	Sweep(nil)
	if got := len(listNamed(other.Prefix + "-")); got != 4 {
		t.Fatalf("live lab %s of another TMPDIR was swept (%d namespaces left)", other.Prefix, got)
	}
	sleeper.Process.Kill()
	sleeper.Wait()
	Sweep(nil)
	if got := len(listNamed(other.Prefix + "-")); got != 0 {
		t.Errorf("stale lab %s (no owner, nothing running) not swept: %d namespaces left", other.Prefix, got)
	}
}

// Up never takes over a prefix in use: it refuses a named one and leaves
// the other lab's directory alone.
func TestUpRefusesAPrefixInUse(t *testing.T) {
	needRoot(t)
	const prefix = "swlinuse"
	dir := DefaultDir(prefix)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := writeOwner(dir, os.Getpid()); err != nil { // a live owner: Sweep spares it
		t.Fatal(err)
	}
	_, err := Up(context.Background(), Options{Prefix: prefix, NoServers: true})
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("Up on a prefix in use: err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ownerFile)); err != nil {
		t.Errorf("the other lab's directory was touched: %v", err)
	}
}
