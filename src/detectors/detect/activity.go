package detect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// LAN traffic between samples (issue 19). A black-hole is seen from flows
// that have waited waitingAfter for an answer, so how soon after its start
// it is seen is set by the sampling: at Interval (3 s) a fault just after
// a sample waits up to 3 s for the next. Sampling faster all the time would
// cost idle CPU the router does not have; sampling faster only while LAN
// traffic flows costs nothing on a quiet tunnel, and without traffic there
// is nothing for a black-hole to break that the periodic checks and the
// idle probe would not find.
//
// So every sample also reads Activity (one small procfs read, far cheaper
// than a sample's fd scan and sock_diag dump). When it rose at
// activityRate or more since the last reading, LAN traffic flows: until
// trafficHold after the last such reading Run looks at Activity every
// lookInterval and samples at once after a look that still sees the rate.
// A quiet tunnel is read once per sample and never looked at in between.
const (
	lookInterval = 250 * time.Millisecond
	// activityRate is new connections per second that count as LAN
	// traffic. The engine's own requests through the tunnel come one at a
	// time (the 503 probe every 2 s, the idle probe every 10 s, a check's
	// 7 probes every 30 s: about 1/s with the footprint bench's LAN request
	// every 5 s); a household using the tunnel opens connections by the
	// dozen per page.
	activityRate = 5
	// trafficHold is how long the looks go on after the last reading that
	// saw traffic: a pause between two page loads is not the end of it.
	trafficHold = 3 * time.Second
)

// No looks on a quiet tunnel: traffic that starts together with the
// black-hole would be seen at the next Interval sample (detection up to
// ~5 s). Looking every 500 ms there as well would see it within a second
// (the bench's node-blackhole, whose LAN client starts just before the
// fault: p95 2.5-2.7 s instead of 4.5 s), but each look is a wake-up of
// the whole process: +2-3 s/h of idle CPU in the footprint bench (issue
// 19, measured against main), more than the sample every Interval costs.
// So the kernel says when LAN traffic starts (Options.Wake: the
// firewall's lan-wake rule logs the LAN's new connections into the tproxy
// to an NFLOG group, at most two a second, and KernelWake turns that into
// wake-ups): a wake-up brings the next sample forward to waitingAfter
// after it, when the first flows of a black-hole have waited long enough
// to be seen. Flows that sent their data a little after the connection
// that woke us (the proxy dials the relay first) are not waiting yet then;
// a woken sample that sees such unanswered flows samples once more when
// the oldest of them has waited waitingAfter (youngIn), and a sample whose
// Activity reading sees activityRate starts the looks as any sample does.
// A wake-up starts no looks by itself: a lone LAN request (the footprint
// bench's one every 5 s) costs one sample, answered flows none more, and
// nothing wakes on a quiet tunnel. Footprint bench (3 min windows, side
// by side with the build without wake-ups): +1.0 and +1.2 s/h (14.2, 14.6
// against 13.2, 13.4), the extra sample 300 ms after each of its LAN
// requests; looks for a second after each wake-up cost +2.0 s/h.

// waitActive waits up to wait, cut short after a look that sees LAN
// traffic, and brought forward to waitingAfter after a wake-up; false when
// ctx ended.
func (d *Detector) waitActive(ctx context.Context, wait time.Duration) bool {
	looks := d.o.Activity != nil && wait > lookInterval
	if looks {
		d.traffic(d.o.Clock.Now()) // the sample's reading
	}
	deadline := d.o.Clock.Now().Add(wait)
	for {
		now := d.o.Clock.Now()
		left := deadline.Sub(now)
		if left <= 0 {
			return true
		}
		looking := looks && d.trafficRecent(now)
		step := left
		if looking {
			step = min(lookInterval, left)
		}
		select {
		case <-ctx.Done():
			return false
		case _, ok := <-d.wake:
			if !ok { // the subscription ended (logged by it): Interval and Activity only
				d.wake = nil
				continue
			}
			if at := d.o.Clock.Now().Add(waitingAfter); at.Before(deadline) {
				deadline = at
				d.mu.Lock()
				d.woken = true // the next sample is the wake-up's (youngIn)
				d.mu.Unlock()
			}
			continue
		case <-d.o.Clock.After(step):
		}
		if looking && d.traffic(d.o.Clock.Now()) {
			return true
		}
	}
}

// traffic reads Activity and reports whether it rose at activityRate since
// the last reading. A reading less than lookInterval after the last one
// judges nothing (a few connections within milliseconds are no rate) and
// keeps the older reading to compare with. A failed reading, or a counter
// that went back (a new proxy in a new namespace), is no traffic: the next
// Interval sample still comes (and finds the proxy gone, if it is).
func (d *Detector) traffic(now time.Time) bool {
	d.mu.Lock()
	if d.activityOK && now.Sub(d.activityAt) < lookInterval {
		d.mu.Unlock()
		return false
	}
	d.mu.Unlock()
	v, err := d.o.Activity()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.activityOK = false
		return false
	}
	el := now.Sub(d.activityAt)
	busy := d.activityOK && v > d.activity && el > 0 &&
		float64(v-d.activity) >= activityRate*el.Seconds()
	d.activity, d.activityAt, d.activityOK = v, now, true
	if busy {
		d.trafficAt = now
	}
	return busy
}

// trafficRecent reports whether a reading within trafficHold saw traffic.
func (d *Detector) trafficRecent(now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.trafficAt.IsZero() && now.Sub(d.trafficAt) < trafficHold && !now.Before(d.trafficAt)
}

// Activity is Options.Activity for the proxy: the TCP connections its
// network namespace has accepted (PassiveOpens in /proc/PID/net/snmp, PID
// a proxy process). The proxy accepts every LAN connection the vendor's
// tproxy hands it, so the counter moves while LAN traffic flows; on a
// quiet tunnel only the engine's own checks move it. It is read from the
// proxy's /proc entry, so it is the proxy's namespace whatever ours is.
func (s *ProxySampler) Activity() (uint64, error) {
	pids, err := s.pids()
	if err != nil {
		return 0, err
	}
	if len(pids) == 0 {
		return 0, errors.New("proxy not running")
	}
	data, err := os.ReadFile(filepath.Join(s.procRoot, strconv.Itoa(pids[0]), "net/snmp"))
	if err != nil {
		return 0, err
	}
	return passiveOpens(data)
}

// passiveOpens reads Tcp PassiveOpens from /proc/net/snmp: a header line
// "Tcp: RtoAlgorithm … PassiveOpens …" and a value line in the same order.
func passiveOpens(snmp []byte) (uint64, error) {
	var header [][]byte
	for line := range bytes.Lines(snmp) {
		if !bytes.HasPrefix(line, []byte("Tcp:")) {
			continue
		}
		f := bytes.Fields(line[len("Tcp:"):])
		if header == nil {
			header = f
			continue
		}
		for i, name := range header {
			if string(name) == "PassiveOpens" && i < len(f) {
				return strconv.ParseUint(string(f[i]), 10, 64)
			}
		}
		break
	}
	return 0, fmt.Errorf("no Tcp PassiveOpens in net/snmp")
}
