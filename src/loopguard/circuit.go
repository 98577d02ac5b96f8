package loopguard

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"surflare-watchdog/src/detectors/detect"
)

// tally is one judged sample: in-flight connections per destination (both
// halves of a looped connection name the same one), and the looped ones
// per destination: accepted sockets whose peer is one of the proxy's own
// outbound sockets to that destination — the proxy's connection come
// back to itself. A LAN client's accepted socket never pairs up so.
type tally struct {
	inflight int
	per      map[netip.AddrPort]int
	looped   map[netip.AddrPort]int
}

func count(conns []detect.Conn) tally {
	t := tally{per: map[netip.AddrPort]int{}, looped: map[netip.AddrPort]int{}}
	out := outboundPairs(conns)
	for _, c := range conns {
		if !c.InFlight() {
			continue
		}
		t.inflight++
		t.per[c.Dst()]++
		if !c.Outbound && out[[2]netip.AddrPort{c.Remote, c.Local}] {
			t.looped[c.Local]++
		}
	}
	return t
}

// outboundPairs are the (local, remote) tuples of the proxy's outbound
// sockets.
func outboundPairs(conns []detect.Conn) map[[2]netip.AddrPort]bool {
	out := map[[2]netip.AddrPort]bool{}
	for _, c := range conns {
		if c.Outbound {
			out[[2]netip.AddrPort{c.Local, c.Remote}] = true
		}
	}
	return out
}

// topUnblocked is the busiest destination without an open circuit, its
// count, and the in-flight connections that are not blocked.
func (t tally) topUnblocked(blocked map[netip.AddrPort]*circuit) (top netip.AddrPort, n, remaining int) {
	remaining = t.inflight
	for d, k := range t.per {
		if blocked[d] != nil {
			remaining -= k
			continue
		}
		if k > n || (k == n && d.Compare(top) < 0) { // ties: the same choice every time
			top, n = d, k
		}
	}
	return top, n, remaining
}

// Observe judges one sample of the proxy's sockets.
func (g *Guard) Observe(ctx context.Context, conns []detect.Conn) {
	// The cheap gate: sockets of every state are at least the in-flight
	// ones, so below MinActive, with no circuit to look after, nothing
	// else needs looking at.
	if g.o.MinActive < 0 {
		return
	}
	if len(conns) < g.o.MinActive && len(g.circuits) == 0 {
		g.mu.Lock()
		g.st.InFlight = len(conns)
		g.mu.Unlock()
		return
	}
	now := g.o.Now()
	t := count(conns)
	for _, c := range g.circuits {
		g.tend(ctx, c, t, conns, now)
	}
	busiest := 0 // the busiest unblocked destination before this sample's circuits opened
	if t.inflight >= g.o.MinActive {
		// Ratio over what remains: blocked destinations are left out, so a
		// loop that moved on to the next relay stands out at once. A floor
		// of half the gate keeps a small remnant from tripping.
		for i := 0; ; i++ {
			top, n, remaining := t.topUnblocked(g.circuits)
			if i == 0 {
				busiest = n
			}
			if remaining < max(1, g.o.MinActive/2) || n*100 <= g.o.Ratio*remaining {
				break
			}
			if !g.open(ctx, top, n, remaining, t, conns, now) {
				break
			}
		}
	}
	g.publish(t.inflight, busiest)
}

// open blocks dst and cuts its looped sockets; false if the block failed
// (it is retried on the next sample). Then it blocks dst's siblings
// (Options.Siblings), each an open circuit of its own: the moment dst is
// blocked the proxy fails over to them, and the loop with it. They come
// after the cut on purpose: under a loop's load one Block is a 5-90 ms
// netlink round trip (lab), and a loop adds ~10 descriptors a
// millisecond; blocked first, they kept dst's loop growing that long
// (1018 of 1024 descriptors in one lab run), while a loop restarting on a
// sibling starts from nothing and dst's descriptors are back already.
func (g *Guard) open(ctx context.Context, dst netip.AddrPort, n, remaining int, t tally, conns []detect.Conn, now time.Time) bool {
	if !g.block(ctx, dst) {
		return false
	}
	c := g.addCircuit(dst, netip.AddrPort{}, t, conns, now)
	log().Warn(fmt.Sprintf("loopguard: circuit open for %s (in-flight %d/%d, suspected proxy loop; %d looped sockets cut, hold %s)",
		dst, n, remaining, c.Cut, c.hold))
	failed := false
	for _, s := range g.siblingsOf(dst) {
		if !g.block(ctx, s) {
			failed = true
			continue
		}
		g.logSibling(g.addCircuit(s, dst, t, conns, now))
	}
	if !failed {
		g.mu.Lock()
		g.st.Err = ""
		g.mu.Unlock()
	}
	return true
}

// block adds dst to the blocked set; false (logged once, kept in State) if
// that failed.
func (g *Guard) block(ctx context.Context, dst netip.AddrPort) bool {
	if err := g.o.Blocker.Block(ctx, dst, g.o.TTL); err != nil {
		g.mu.Lock()
		first := g.st.Err == ""
		g.st.Err = err.Error()
		g.mu.Unlock()
		if first {
			log().Error(fmt.Sprintf("loopguard: cannot block %s: %v", dst, err))
		}
		return false
	}
	return true
}

// addCircuit records a circuit for dst, just blocked (siblingOf: the
// destination whose circuit opened it, zero for one the ratio opened), and
// cuts the looped sockets to it.
func (g *Guard) addCircuit(dst, siblingOf netip.AddrPort, t tally, conns []detect.Conn, now time.Time) *circuit {
	hold := g.o.Hold
	if h, ok := g.past[dst]; ok && now.Sub(h.closed) < g.o.TTL {
		hold = min(2*h.hold, g.o.TTL)
	}
	c := &circuit{Circuit: Circuit{Dst: dst, SiblingOf: siblingOf, Since: now, Looped: t.looped[dst], HoldS: hold.Seconds()},
		hold: hold, lastBlock: now}
	g.circuits[dst] = c
	if g.drained(c.Looped) {
		c.drained = now // a sibling: nothing loops to it (yet)
	}
	if c.Looped > 0 {
		c.Cut = g.cut(dst, conns)
	}
	g.mu.Lock()
	g.st.Blocks++
	g.st.Dst = dst
	g.mu.Unlock()
	return c
}

// tend keeps an open circuit: refresh its element, cut looped sockets that
// are still there, and close it once they have drained for its hold.
func (g *Guard) tend(ctx context.Context, c *circuit, t tally, conns []detect.Conn, now time.Time) {
	c.Looped = t.looped[c.Dst]
	if !g.drained(c.Looped) {
		c.drained = time.Time{}
		c.Cut += g.cut(c.Dst, conns)
	} else if c.drained.IsZero() {
		c.drained = now
	}
	if !c.drained.IsZero() && now.Sub(c.drained) >= c.hold {
		g.close(ctx, c, now)
		return
	}
	if now.Sub(c.lastBlock) >= g.o.TTL/3 {
		if err := g.o.Blocker.Block(ctx, c.Dst, g.o.TTL); err != nil {
			log().Warn(fmt.Sprintf("loopguard: refreshing the block of %s failed: %v", c.Dst, err))
			return
		}
		c.lastBlock = now
	}
}

// drained says whether a circuit with this many looped connections has
// drained: fewer than a twentieth of the gate (a few legitimate ones may
// name a relay as their destination).
func (g *Guard) drained(looped int) bool { return looped*20 < max(g.o.MinActive, 20) }

func (g *Guard) close(ctx context.Context, c *circuit, now time.Time) {
	delete(g.circuits, c.Dst)
	g.past[c.Dst] = history{hold: c.hold, closed: now}
	log().Info(fmt.Sprintf("loopguard: circuit closed for %s (looped %d, open %.1fs, %d sockets cut)",
		c.Dst, c.Looped, now.Sub(c.Since).Seconds(), c.Cut))
	if u, ok := g.o.Blocker.(Unblocker); ok {
		if err := u.Unblock(ctx, c.Dst); err != nil {
			log().Warn(fmt.Sprintf("loopguard: removing %s early failed (it times out by itself): %v", c.Dst, err))
		}
	}
}

// cut destroys the looped sockets to dst: both halves of every pair — an
// outbound socket to dst and the accepted socket it came back as (local
// dst, remote the outbound socket's local end). An outbound socket to dst
// with no accepted twin is the proxy's real connection, an accepted one
// with no outbound twin a LAN client's: both are spared.
func (g *Guard) cut(dst netip.AddrPort, conns []detect.Conn) int {
	if g.o.Killer == nil {
		return 0
	}
	out := outboundPairs(conns)
	var victims []detect.Conn
	for _, c := range conns {
		if !c.Outbound && c.Local == dst && out[[2]netip.AddrPort{c.Remote, c.Local}] {
			victims = append(victims, c, detect.Conn{Local: c.Remote, Remote: c.Local, Outbound: true})
		}
	}
	n, failed, firstErr := g.kill(victims)
	if failed > 0 {
		log().Warn(fmt.Sprintf("loopguard: %d of %d looped sockets to %s could not be destroyed: %v", failed, len(victims), dst, firstErr))
	}
	g.mu.Lock()
	g.st.Cut += n
	g.mu.Unlock()
	return n
}

// kill destroys victims, all at once with a BatchKiller.
func (g *Guard) kill(victims []detect.Conn) (n, failed int, firstErr error) {
	if b, ok := g.o.Killer.(BatchKiller); ok {
		socks := make([][2]netip.AddrPort, len(victims))
		for i, c := range victims {
			socks[i] = [2]netip.AddrPort{c.Local, c.Remote}
		}
		n, err := b.KillAll(socks)
		if err != nil {
			return n, len(victims) - n, err
		}
		return n, 0, nil
	}
	for _, c := range victims {
		if err := g.o.Killer.Kill(c.Local, c.Remote); err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		n++
	}
	return n, failed, firstErr
}

// publish copies the circuits into the state snapshot.
func (g *Guard) publish(inflight, top int) {
	cs := make([]Circuit, 0, len(g.circuits))
	for _, c := range g.circuits {
		cs = append(cs, c.Circuit)
	}
	slices.SortFunc(cs, func(a, b Circuit) int { return a.Since.Compare(b.Since) })
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st.InFlight, g.st.Top = inflight, top
	g.st.Circuits = cs
	g.st.Open = len(cs) > 0
	g.st.Since = time.Time{}
	if len(cs) > 0 {
		g.st.Since = cs[0].Since
	} else {
		g.st.Dst = netip.AddrPort{}
	}
}
