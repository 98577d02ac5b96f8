package internet

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"surflare-watchdog/src/lab/fakes"
)

// Every answered question is logged with the address the resolver saw, over
// UDP, TCP and DoH alike.
func TestQueryLogRecordsWhoAsked(t *testing.T) {
	dir := t.TempDir()
	base := netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(250)), byte(1 + rand.IntN(250)), 0})
	cfg := LoopbackConfig(base, fakes.NewWatcher(dir, nil))
	logPath := filepath.Join(dir, "log", QueryLogName)
	cfg.OnQuery = QueryFileLogger(logPath)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); s.Wait() })

	resolver := cfg.DNS[0]
	client := netip.AddrFrom4([4]byte{127, 0, 0, 9}) // a source address of our choosing
	d := net.Dialer{LocalAddr: &net.UDPAddr{IP: client.AsSlice()}, Timeout: 2 * time.Second}
	uc, err := d.Dial("udp", hostPort(resolver, cfg.DNSPort))
	if err != nil {
		t.Fatal(err)
	}
	uc.SetDeadline(time.Now().Add(2 * time.Second))
	uc.Write(BuildQuery(1, "U.foreign.lab", dnsTypeA))
	uc.Read(make([]byte, 512))
	uc.Close()

	d.LocalAddr = &net.TCPAddr{IP: client.AsSlice()}
	tc, err := d.Dial("tcp", hostPort(resolver, cfg.DNSPort))
	if err != nil {
		t.Fatal(err)
	}
	m := BuildQuery(2, "t.foreign.lab", dnsTypeAAAA)
	tc.SetDeadline(time.Now().Add(2 * time.Second))
	tc.Write(append([]byte{0, byte(len(m))}, m...))
	tc.Read(make([]byte, 512))
	tc.Close()

	resp, err := http.Get("http://" + hostPort(cfg.DoH[0], cfg.DoHPort) + "/dns-query?dns=" +
		base64.RawURLEncoding.EncodeToString(BuildQuery(3, "h.foreign.lab", dnsTypeA)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []Query
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var q Query
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			t.Fatalf("bad log line %q: %v", sc.Text(), err)
		}
		got = append(got, q)
	}
	want := []Query{
		{Resolver: resolver.String(), From: client.String(), Proto: "udp", Name: "u.foreign.lab", Type: dnsTypeA},
		{Resolver: resolver.String(), From: client.String(), Proto: "tcp", Name: "t.foreign.lab", Type: dnsTypeAAAA},
		{Resolver: cfg.DoH[0].String(), From: "127.0.0.1", Proto: "doh", Name: "h.foreign.lab", Type: dnsTypeA},
	}
	if len(got) != len(want) {
		t.Fatalf("logged %+v, want %d entries", got, len(want))
	}
	for i := range want {
		g := got[i]
		g.Time = time.Time{}
		if g != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, g, want[i])
		}
	}
}
