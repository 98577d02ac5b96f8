package internet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"surflare-watchdog/src/lab/fakes"
)

// world is a whole lab internet on loopback addresses 127.X.Y.n, with the
// same ports for every service as the plan would use on its own addresses.
type world struct {
	cfg    Config
	labDir string
	base   [3]byte
}

func (w *world) addr(n byte) netip.Addr {
	return netip.AddrFrom4([4]byte{w.base[0], w.base[1], w.base[2], n})
}

// setFaults writes faults.json; the world's watcher clock advances a second
// on every read, so the next request sees the change.
func (w *world) setFaults(t *testing.T, change func(*fakes.Faults)) {
	t.Helper()
	if _, err := fakes.Update(w.labDir, time.Now(), change); err != nil {
		t.Fatal(err)
	}
}

func startWorld(t *testing.T) *world {
	t.Helper()
	w := &world{labDir: t.TempDir(), base: [3]byte{127, byte(1 + rand.IntN(250)), byte(1 + rand.IntN(250))}}
	var tick atomic.Int64
	start := time.Now()
	clock := func() time.Time { return start.Add(time.Duration(tick.Add(1)) * time.Second) }
	w.cfg = LoopbackConfig(w.addr(0), fakes.NewWatcher(w.labDir, clock))
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx, w.cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); s.Wait() })
	return w
}

func (w *world) relay(name string) string {
	for _, r := range w.cfg.Relays {
		if r.Name == name {
			return hostPort(r.Addr, w.cfg.RelayPort)
		}
	}
	panic("no relay " + name)
}

func (w *world) node(name string) netip.Addr {
	for _, n := range w.cfg.Nodes {
		if n.Name == name {
			return n.Addr
		}
	}
	panic("no node " + name)
}

// tunnelGet does GET url through relay -> exit and returns status and body.
func (w *world) tunnelGet(t *testing.T, relay, exit string, dst netip.Addr, path string) (int, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := fakes.DialTunnel(ctx, d.DialContext, w.relay(relay), exit, hostPort(dst, w.cfg.HTTPPort))
	if err != nil {
		return 0, "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", err
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func TestTunnelChainExitsFromTheNodeAddress(t *testing.T) {
	w := startWorld(t)
	code, body, err := w.tunnelGet(t, "Singapore", "Los Angeles", w.cfg.IPEcho[0], "/")
	if err != nil || code != 200 {
		t.Fatalf("GET through tunnel: %d %v", code, err)
	}
	var e EchoReply
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("echo reply %q: %v", body, err)
	}
	if e.IP != w.node("Los Angeles").String() || e.Country != "US" {
		t.Fatalf("echo saw %+v, want the Los Angeles exit %s", e, w.node("Los Angeles"))
	}
}

func TestNodeDownAndRelayDown(t *testing.T) {
	w := startWorld(t)
	w.setFaults(t, func(f *fakes.Faults) { f.NodeDown = []string{"Dallas", "Tokyo"} })
	_, _, err := w.tunnelGet(t, "Singapore", "Dallas", w.cfg.IPEcho[0], "/")
	var te *fakes.TunnelError
	if !errors.As(err, &te) || !strings.Contains(te.Reason, "Dallas") {
		t.Fatalf("down exit: want ERR naming Dallas from the relay, got %v", err)
	}
	if _, _, err := w.tunnelGet(t, "Tokyo", "Chicago", w.cfg.IPEcho[0], "/"); err == nil || errors.As(err, &te) {
		t.Fatalf("down relay: want a reset, got %v", err)
	}
	if code, _, err := w.tunnelGet(t, "Singapore", "Chicago", w.cfg.IPEcho[0], "/"); err != nil || code != 200 {
		t.Fatalf("healthy pair broken: %d %v", code, err)
	}
	w.setFaults(t, func(f *fakes.Faults) { f.NodeDown = nil })
	if code, _, err := w.tunnelGet(t, "Tokyo", "Dallas", w.cfg.IPEcho[0], "/"); err != nil || code != 200 {
		t.Fatalf("after clearing the fault: %d %v", code, err)
	}
}

func TestNode503AnswersTheURLTestTarget(t *testing.T) {
	w := startWorld(t)
	w.setFaults(t, func(f *fakes.Faults) { f.Node503 = []string{"Miami"} })
	code, _, err := w.tunnelGet(t, "Tokyo", "Miami", w.cfg.Search[0], URLTestPath)
	if err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("Miami: want 503, got %d %v", code, err)
	}
	// Ordinary traffic still flows through the 503-ing exit.
	code, body, err := w.tunnelGet(t, "Tokyo", "Miami", w.cfg.IPEcho[0], "/")
	if err != nil || code != http.StatusOK || !strings.Contains(body, `"country":"US"`) {
		t.Fatalf("Miami echo: want 200 from the exit, got %d %q %v", code, body, err)
	}
	code, _, err = w.tunnelGet(t, "Tokyo", "Atlanta", w.cfg.Search[0], "/generate_204")
	if err != nil || code != http.StatusNoContent {
		t.Fatalf("Atlanta: want 204, got %d %v", code, err)
	}
}

func TestLatencyFaultSlowsOnlyThatNode(t *testing.T) {
	w := startWorld(t)
	const extra = 150 * time.Millisecond
	w.setFaults(t, func(f *fakes.Faults) { f.LatencyMS = map[string]int{"Chicago": int(extra / time.Millisecond)} })
	t0 := time.Now()
	if _, _, err := w.tunnelGet(t, "Tokyo", "Chicago", w.cfg.IPEcho[0], "/"); err != nil {
		t.Fatal(err)
	}
	// connect + one chunk each way = at least 2x the configured RTT.
	if d := time.Since(t0); d < 2*extra {
		t.Fatalf("Chicago took %v, want >= %v", d, 2*extra)
	}
	t0 = time.Now()
	if _, _, err := w.tunnelGet(t, "Tokyo", "Dallas", w.cfg.IPEcho[0], "/"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > extra {
		t.Fatalf("Dallas took %v with no latency fault", d)
	}
}

func TestUnknownExitIsRefused(t *testing.T) {
	w := startWorld(t)
	_, _, err := w.tunnelGet(t, "Tokyo", "Atlantis", w.cfg.IPEcho[0], "/")
	var te *fakes.TunnelError
	if !errors.As(err, &te) || !strings.Contains(te.Reason, "Atlantis") {
		t.Fatalf("want ERR unknown exit, got %v", err)
	}
}

func (w *world) api(t *testing.T, method, path, token string, body any) (int, []byte, error) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+hostPort(w.cfg.AccountAPI[0], w.cfg.HTTPPort)+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, nil
}

func (w *world) login(t *testing.T, password string) (int, string) {
	t.Helper()
	code, b, err := w.api(t, "POST", "/v1/login", "", LoginRequest{Email: "user@lab.test", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	var r LoginReply
	json.Unmarshal(b, &r)
	if code != 200 {
		return code, string(b)
	}
	return code, r.Token
}

func TestAccountAPIFaults(t *testing.T) {
	w := startWorld(t)
	if code, body := w.login(t, "wrong"); code != 401 || !strings.Contains(body, "invalid username/password") {
		t.Fatalf("wrong password: %d %s", code, body)
	}
	code, tok := w.login(t, fakes.LabPassword)
	if code != 200 || tok == "" {
		t.Fatalf("login: %d %q", code, tok)
	}
	if code, b, _ := w.api(t, "GET", "/v1/account", tok, nil); code != 200 || !strings.Contains(string(b), `"active"`) {
		t.Fatalf("account: %d %s", code, b)
	}
	w.setFaults(t, func(f *fakes.Faults) { f.Auth = fakes.AuthExpired })
	if code, b, _ := w.api(t, "GET", "/v1/account", tok, nil); code != 401 || !strings.Contains(string(b), "session expired") {
		t.Fatalf("old session under expired fault: %d %s", code, b)
	}
	_, tok2 := w.login(t, fakes.LabPassword)
	if code, b, _ := w.api(t, "GET", "/v1/account", tok2, nil); code != 200 {
		t.Fatalf("a fresh login must cure an expired session: %d %s", code, b)
	}
	for auth, want := range map[string]string{
		fakes.AuthRateLimited:  "Too Many Requests",
		fakes.AuthInvalid:      "invalid username/password",
		fakes.AuthSubscription: "Subscription expired",
		fakes.AuthDeviceLimit:  "Device limit",
		fakes.AuthAccountCheck: "Account check failed",
	} {
		w.setFaults(t, func(f *fakes.Faults) { f.Auth = auth })
		if code, body := w.login(t, fakes.LabPassword); code == 200 || !strings.Contains(body, want) {
			t.Errorf("auth=%s: login %d %s, want %q", auth, code, body, want)
		}
	}
	w.setFaults(t, func(f *fakes.Faults) { f.Auth = ""; f.APIDown = true })
	if _, _, err := w.api(t, "GET", "/v1/account", tok2, nil); err == nil {
		t.Fatal("api_down: request succeeded")
	}
}

func TestDNSOverUDPTCPAndDoH(t *testing.T) {
	w := startWorld(t)
	dnsAddr := hostPort(w.cfg.DNS[0], w.cfg.DNSPort)
	parseA := func(resp []byte) (rcode int, addrs []netip.Addr) {
		rcode = int(binary.BigEndian.Uint16(resp[2:4]) & 0xf)
		an := binary.BigEndian.Uint16(resp[6:8])
		// Answers follow the question; each is ptr(2) type(2) class(2) ttl(4) len(2) rdata.
		_, off, _ := readName(resp, 12)
		off += 4
		for i := 0; i < int(an); i++ {
			l := int(binary.BigEndian.Uint16(resp[off+10 : off+12]))
			a, _ := netip.AddrFromSlice(resp[off+12 : off+12+l])
			addrs = append(addrs, a)
			off += 12 + l
		}
		return rcode, addrs
	}
	uc, err := net.Dial("udp", dnsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	uc.SetDeadline(time.Now().Add(3 * time.Second))
	uc.Write(BuildQuery(7, "www.Foreign.lab", dnsTypeA))
	buf := make([]byte, 512)
	n, err := uc.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if rc, addrs := parseA(buf[:n]); rc != 0 || len(addrs) != 1 || addrs[0] != w.cfg.Search[0] || binary.BigEndian.Uint16(buf[:2]) != 7 {
		t.Fatalf("UDP A www.foreign.lab: rcode %d %v", rc, addrs)
	}

	tc, err := net.Dial("tcp", dnsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(3 * time.Second))
	for _, q := range []struct {
		name  string
		qtype uint16
		rc    int
		n     int
	}{{"nothing.example", dnsTypeA, rcodeNX, 0}, {"ipv6.lab", dnsTypeAAAA, 0, 1}, {"ipv6.lab", dnsTypeA, 0, 0}} {
		m := BuildQuery(9, q.name, q.qtype)
		tc.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(m))), m...))
		var l [2]byte
		if _, err := io.ReadFull(tc, l[:]); err != nil {
			t.Fatal(err)
		}
		resp := make([]byte, binary.BigEndian.Uint16(l[:]))
		io.ReadFull(tc, resp)
		if rc, addrs := parseA(resp); rc != q.rc || len(addrs) != q.n {
			t.Errorf("TCP %s type %d: rcode %d, %v", q.name, q.qtype, rc, addrs)
		}
	}

	resp, err := http.Get("http://" + hostPort(w.cfg.DoH[0], w.cfg.DoHPort) + "/dns-query?dns=" +
		base64.RawURLEncoding.EncodeToString(BuildQuery(1, "a.foreign.lab", dnsTypeA)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rc, addrs := parseA(b); rc != 0 || len(addrs) != 1 || addrs[0] != w.cfg.Search[0] {
		t.Fatalf("DoH: rcode %d %v", rc, addrs)
	}
}

func TestCDNTraceAndDirectEcho(t *testing.T) {
	w := startWorld(t)
	resp, err := http.Get("http://" + hostPort(w.cfg.CDNTrace[0], w.cfg.HTTPPort) + "/cdn-cgi/trace")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "\nloc=ZZ\n") || !strings.Contains(string(b), "\nip=127.") {
		t.Fatalf("trace body:\n%s", b)
	}
	code, body, err := w.tunnelGet(t, "Tokyo", "Atlanta", w.cfg.CDNTrace[0], "/cdn-cgi/trace")
	if err != nil || code != 200 || !strings.Contains(body, "\nloc=US\n") || !strings.Contains(body, "ip="+w.node("Atlanta").String()) {
		t.Fatalf("trace via Atlanta: %d %v\n%s", code, err, body)
	}
}

func TestZoneAnswerRejectsGarbage(t *testing.T) {
	z := PlanZone()
	for _, m := range [][]byte{nil, {1, 2, 3}, bytes.Repeat([]byte{0xff}, 12)} {
		if _, err := z.Answer(m); err == nil && len(m) < 12 {
			t.Errorf("Answer(%x) accepted a short message", m)
		}
	}
	// A query with a truncated name gets FORMERR, not a panic.
	q := BuildQuery(1, "foreign.lab", dnsTypeA)
	resp, err := z.Answer(q[:15])
	if err != nil || resp[3]&0xf != rcodeFormat {
		t.Fatalf("truncated query: %x %v", resp, err)
	}
}
