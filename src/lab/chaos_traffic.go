package lab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// The household during a chaos run: client 0 asks the IP-echo host every
// chaosEchoEvery (the recovery signal: a request that comes back through
// an exit node); the last client keeps the rest going — short HTTP to the
// search host, a kept-alive stream of requests (the bulk download), DNS to
// a foreign resolver (the router must answer it), UDP datagrams and IPv6
// fetches. Those need not succeed (a fault may cut them); they must not
// leak, and the leak counters see every packet of theirs.

const (
	chaosEchoEvery    = 200 * time.Millisecond
	chaosEchoTimeout  = 5 * time.Second
	chaosEchoInFlight = 30
	chaosMixEvery     = 500 * time.Millisecond
)

// chaosTrafficCounts are per-kind outcomes.
type chaosTrafficCounts struct {
	OK   int `json:"ok"`
	Fail int `json:"fail"`
}

type chaosTraffic struct {
	l *Lab

	mu     sync.Mutex
	echo   []clientResult
	counts map[string]*chaosTrafficCounts
	wg     sync.WaitGroup
}

func newChaosTraffic(l *Lab) *chaosTraffic {
	t := &chaosTraffic{l: l, counts: map[string]*chaosTrafficCounts{}}
	for _, k := range []string{"echo", "http", "bulk", "dns", "udp", "ipv6"} {
		t.counts[k] = &chaosTrafficCounts{}
	}
	return t
}

func (t *chaosTraffic) count(kind string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ok {
		t.counts[kind].OK++
	} else {
		t.counts[kind].Fail++
	}
}

func (t *chaosTraffic) start(ctx context.Context) {
	mix := len(t.l.clients) - 1
	t.wg.Add(3)
	go func() { defer t.wg.Done(); t.echoLoop(ctx) }()
	go func() { defer t.wg.Done(); t.mixLoop(ctx, mix) }()
	go func() { defer t.wg.Done(); t.bulkLoop(ctx, mix) }()
}

func (t *chaosTraffic) wait() { t.wg.Wait() }

// echoLoop starts a request every chaosEchoEvery without waiting for the
// last one, so a hung request does not hide the moment traffic is back.
func (t *chaosTraffic) echoLoop(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, chaosEchoInFlight)
	tick := time.NewTicker(chaosEchoEvery)
	defer tick.Stop()
	for {
		select {
		case sem <- struct{}{}:
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				start := time.Now()
				rctx, cancel := context.WithTimeout(ctx, chaosEchoTimeout)
				e, err := t.l.ClientEcho(rctx, 0)
				cancel()
				if ctx.Err() != nil {
					return
				}
				r := clientResult{Start: start, End: time.Now(), OK: err == nil && ExitName(e.IP) != "", IP: e.IP}
				if err != nil {
					r.Err = err.Error()
				}
				t.count("echo", r.OK)
				t.mu.Lock()
				t.echo = append(t.echo, r)
				t.mu.Unlock()
			}()
		default:
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// recoveredAfter is the end of the first echo request that started after
// t and came back through an exit node (zero if none yet).
func (t *chaosTraffic) recoveredAfter(after time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var at time.Time
	for _, r := range t.echo {
		if r.OK && r.Start.After(after) && (at.IsZero() || r.End.Before(at)) {
			at = r.End
		}
	}
	return at
}

// firstFailAfter is the start of the first echo request that started in
// [from, until) and failed (zero if none did).
func (t *chaosTraffic) firstFailAfter(from, until time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var at time.Time
	for _, r := range t.echo {
		if !r.OK && !r.Start.Before(from) && r.Start.Before(until) && (at.IsZero() || r.Start.Before(at)) {
			at = r.Start
		}
	}
	return at
}

// mixLoop is the short HTTP, DNS, UDP and IPv6 traffic of one client.
func (t *chaosTraffic) mixLoop(ctx context.Context, client int) {
	tick := time.NewTicker(chaosMixEvery)
	defer tick.Stop()
	for i := 0; ; i++ {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		f := t.l.ClientFetch(rctx, client, "http://"+Search.String()+"/")
		t.count("http", f.Err == nil && f.Status == http.StatusOK)
		if i%2 == 0 {
			_, err := t.l.ClientResolve(rctx, client, ForeignDNS, UniqueName("chaos", "foreign.lab"), time.Second)
			t.count("dns", err == nil)
			t.count("udp", t.udp(rctx, client) == nil)
			f6 := t.l.ClientFetch(rctx, client, "http://["+Internet6.String()+"]/")
			t.count("ipv6", f6.Err == nil && f6.Status == http.StatusOK)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// udp sends a datagram to an echo host's port 443 (QUIC's) and does not
// wait for an answer: it is there to be caught by the kill switch or the
// proxy, or counted as a leak.
func (t *chaosTraffic) udp(ctx context.Context, client int) error {
	ns, err := t.l.NS(t.l.clients[client].Role)
	if err != nil {
		return err
	}
	c, err := dialIn(ctx, ns, "udp4", netip.AddrPortFrom(IPEcho[1], 443).String())
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte("chaos udp datagram"))
	return err
}

// bulkLoop keeps one kept-alive connection busy with back-to-back requests
// (a long download seen by the firewall and the proxy as one flow); when
// a fault breaks it, it dials again.
func (t *chaosTraffic) bulkLoop(ctx context.Context, client int) {
	ns, err := t.l.NS(t.l.clients[client].Role)
	if err != nil {
		return
	}
	dst := netip.AddrPortFrom(Search, 80)
	for ctx.Err() == nil {
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		c, err := dialIn(dctx, ns, "tcp4", dst.String())
		cancel()
		if err != nil {
			t.count("bulk", false)
			sleepCtx(ctx, 500*time.Millisecond)
			continue
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		r := bufio.NewReader(c)
		for ctx.Err() == nil {
			if err := bulkGet(c, r, dst); err != nil {
				t.count("bulk", false)
				break
			}
			t.count("bulk", true)
			sleepCtx(ctx, 50*time.Millisecond)
		}
		stop()
		c.Close()
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

func bulkGet(c net.Conn, r *bufio.Reader, dst netip.AddrPort) error {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nUser-Agent: lab-chaos-bulk\r\n\r\n", dst.Addr()); err != nil {
		return err
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || resp.Close {
		return fmt.Errorf("HTTP %d close=%v", resp.StatusCode, resp.Close)
	}
	return nil
}

// snapshot copies the counts.
func (t *chaosTraffic) snapshot() map[string]chaosTrafficCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]chaosTrafficCounts{}
	for k, v := range t.counts {
		out[k] = *v
	}
	return out
}
