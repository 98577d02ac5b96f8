package detect

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func silentConn() Conn {
	return Conn{Outbound: true, HasInfo: true, State: StateEstablished, LastDataSent: 2 * time.Second, LastDataRecv: 3 * time.Second}
}

func answeredConn() Conn {
	return Conn{Outbound: true, HasInfo: true, State: StateEstablished, LastDataSent: 100 * time.Millisecond, LastDataRecv: 50 * time.Millisecond}
}

func stalledSyn(retries uint8) Conn {
	return Conn{Outbound: true, HasInfo: true, State: StateSynSent, Retrans: retries}
}

func repeat(c Conn, n int) []Conn {
	out := make([]Conn, n)
	for i := range out {
		out[i] = c
	}
	return out
}

// Kernel evidence is the node's that was in use when it was sampled: the
// silent flows of a black-holed Dallas corroborate a failed check on
// Dallas, never one on Los Angeles after the rotation.
func TestNodeTallyBindsKernelEvidenceToTheNodeInUse(t *testing.T) {
	node := "Dallas"
	tl := NewNodeTally(func() string { return node }, 16)
	now := time.Unix(1000, 0)
	tl.Observe(now, repeat(silentConn(), 7))
	if why, ok := tl.Corroborate(now, "Dallas", "auto"); ok {
		t.Fatalf("7 silent flows (14 points < 16) corroborate: %s", why)
	}
	now = now.Add(500 * time.Millisecond)
	tl.Observe(now, repeat(silentConn(), 8))
	why, ok := tl.Corroborate(now, "Dallas", "auto")
	if !ok || !strings.Contains(why, "8 of the proxy's connections to the relays silent") || !strings.Contains(why, "on Dallas") {
		t.Fatalf("8 silent flows on Dallas: %v %q", ok, why)
	}
	if c := tl.Counts("Dallas", now); c.Silent != 8 || c.Samples != 2 {
		t.Errorf("counts %+v", c)
	}
	if _, ok := tl.Corroborate(now.Add(evidenceMemory+time.Second), "Dallas", "auto"); ok {
		t.Error("evidence older than its memory still corroborates")
	}
	// Rotated: the first sample on Los Angeles is healthy.
	node = "Los Angeles"
	now = now.Add(time.Second)
	tl.Observe(now, repeat(answeredConn(), 3))
	if why, ok := tl.Corroborate(now, "Los Angeles", "auto"); ok {
		t.Fatalf("Dallas's silent flows corroborate a failed check on Los Angeles: %s", why)
	}
	if _, ok := tl.Corroborate(now, "Dallas", "auto"); ok {
		t.Error("the node we left is still judged by the kernel")
	}
}

// Handshakes stuck in SYN_SENT are evidence only while nothing through the
// relays answers: on a lossy but working path some handshakes stall, and
// the established flows keep getting answers.
func TestNodeTallyStalledHandshakes(t *testing.T) {
	tl := NewNodeTally(func() string { return "Dallas" }, 16)
	now := time.Unix(1000, 0)
	lossy := append(repeat(stalledSyn(2), 5), answeredConn())
	tl.Observe(now, lossy)
	if why, ok := tl.Corroborate(now, "Dallas", "auto"); ok {
		t.Fatalf("stalled handshakes beside an answered flow corroborate: %s", why)
	}
	tl.Observe(now.Add(time.Second), append(repeat(stalledSyn(1), 5), stalledSyn(2), stalledSyn(2)))
	if why, ok := tl.Corroborate(now.Add(time.Second), "Dallas", "auto"); ok {
		t.Fatalf("2 handshakes with 2 retries (and 5 with one) corroborate: %s", why)
	}
	tl.Observe(now.Add(2*time.Second), repeat(stalledSyn(3), 3))
	why, ok := tl.Corroborate(now.Add(2*time.Second), "Dallas", "auto")
	if !ok || !strings.Contains(why, "3 of the proxy's connections to the relays stuck in SYN_SENT") {
		t.Fatalf("3 stalled handshakes and nothing answering: %v %q", ok, why)
	}
	tl2 := NewNodeTally(func() string { return "" }, 16)
	tl2.Observe(now, repeat(stalledSyn(3), 9))
	if _, ok := tl2.Corroborate(now, "", "auto"); ok {
		t.Error("samples with no node in use count")
	}
}

// The kernel really reports SYN retries of a handshake nobody answers as
// backoff in SYN_SENT, through the sampler's sock_diag.
func TestProxySamplerSeesStalledHandshakes(t *testing.T) {
	name, ns := labNS(t)
	nft(t, name, fmt.Sprintf("table inet synhole {\n chain in {\n  type filter hook input priority 0;\n  tcp dport %d tcp flags syn drop\n }\n}\n", serverPort+1))
	// Non-blocking connects made on the thread inside the namespace: the
	// sockets stay there, in SYN_SENT, while the SYNs are dropped.
	inNS(t, ns, func() {
		for range 3 {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(fd) })
			err = unix.Connect(fd, &unix.SockaddrInet4{Port: serverPort + 1, Addr: [4]byte{127, 0, 0, 1}})
			if err != unix.EINPROGRESS {
				t.Fatalf("connect: %v, want EINPROGRESS", err)
			}
		}
	})
	s := selfSampler(t, ns)
	tl := NewNodeTally(func() string { return "Dallas" }, 16)
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		conns, err := s.Sample(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		tl.Observe(time.Now(), conns)
		if _, ok := tl.Corroborate(time.Now(), "Dallas", "auto"); ok {
			t.Logf("counts %+v", tl.Counts("Dallas", time.Now()))
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("3 unanswered handshakes never counted as stalled within 8 s: %+v", tl.Counts("Dallas", time.Now()))
}
