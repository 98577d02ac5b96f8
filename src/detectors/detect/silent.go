package detect

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// A silent flow is the signature of a node black-hole behind a live relay:
// the proxy sent data on an established connection to a relay, the relay's
// kernel acknowledged every byte (nothing unacked: the relay is alive), and
// nothing has come back since. The relay is waiting on an exit that does
// not answer. The kernel's cwnd/RTO/backoff signs never see this — no
// segment is lost — so without this term the detector stays quiet and the
// black-hole waits for the proxy's urltest round and the probe timeout.
const (
	// silentAfter is how long a flow must wait for its answer to count as
	// silent: a healthy relay path answers in tens of ms, and a lost reply
	// is retransmitted after about rtt+200 ms, so 1.5 s of silence takes
	// several losses in a row on a lossy but working path.
	silentAfter = 1500 * time.Millisecond
	// waitingAfter makes a sample look again sooner (quickInterval, or
	// when the flows turn silent) and ask for a check (suspectCooldown):
	// flows waiting this long for an answer may be the start of a
	// black-hole. A working path through the VPN answers in one RTT
	// (150-300 ms) plus the server's time.
	waitingAfter = 300 * time.Millisecond
	// quickInterval is the re-sample delay while flows are waiting, and
	// maxQuick bounds how many quick samples follow each other before one
	// full Interval (a long-poll that never answers must not turn the
	// detector into a fast poller).
	quickInterval = 500 * time.Millisecond
	maxQuick      = 4
	// suspectCooldown is the least time between two Suspect calls. The
	// first sample that sees a flow waiting waitingAfter asks for a check
	// at once (a suspect): on a black-hole that check is already running
	// when the flows have been silent for silentAfter and the firing makes
	// it a confirming one (watchdog: promoteCheckLocked), so its probes'
	// 2 s overlap the silence build-up instead of following it. A waiting
	// flow is also a slow server or a long-poll on a working tunnel; the
	// check then passes and stands in for the next periodic one, and the
	// cooldown keeps a household full of long-polls at one extra check per
	// CheckInterval (30 s) at most.
	suspectCooldown = 30 * time.Second
	// crossMargin is added to the moment the next flow turns silent: the
	// kernel counts last_data_sent in jiffies (up to 10 ms at HZ=100).
	crossMargin = 20 * time.Millisecond
	// minQuick is the shortest re-sample delay.
	minQuick = 50 * time.Millisecond
	// evidenceMemory is how long a firing caused by silent flows stays
	// evidence for the engine (Evidence): long enough for the check it
	// asked for to finish, short enough to describe the path now.
	evidenceMemory = 15 * time.Second
)

// waitingFor reports whether c is an established outbound connection
// whose last sent data was fully acknowledged and has had no answer for at
// least d. Receive and send times are compared with >=: the kernel keeps
// them in jiffies, and a request sent right after connect shares the
// connect's jiffy (a never-answered flow's receive time is its connect).
func waitingFor(c Conn, d time.Duration) bool {
	return c.Outbound && c.HasInfo && c.State == StateEstablished && c.Unacked == 0 &&
		c.LastDataSent >= d && c.LastDataRecv >= c.LastDataSent
}

// Silent reports whether c is a silent flow (see silentAfter).
func Silent(c Conn) bool { return waitingFor(c, silentAfter) }

// Evidence says whether the detector fired within the last evidenceMemory
// because of silent flows, with the reason it logged. The engine treats it
// like the proxy's own urltest failures: a failed check it corroborates
// rotates at once (watchdog.Corroborator, through fastsignal.Evidence).
func (d *Detector) Evidence(now time.Time) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.silentFired.IsZero() || now.Sub(d.silentFired) > evidenceMemory || now.Before(d.silentFired) {
		return "", false
	}
	return d.silentWhy, true
}

// nextInterval is the wait before the next sample: Interval, or, after a
// wake-up's sample that saw flows not yet waiting, the moment the oldest
// of them will be (youngIn); or, while
// flows are waiting for an answer and fewer than maxQuick quick samples
// came in a row, quickInterval — or sooner, at the moment enough of the
// waiting flows will have been silent for silentAfter to fire (crossIn):
// a fixed step would see them up to quickInterval late.
func (d *Detector) nextInterval() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	woken := d.woken
	d.woken = false
	if woken && d.waiting == 0 && d.youngIn > 0 && d.youngIn < d.o.Interval {
		// The wake-up's sample came before the new flows had waited
		// waitingAfter (activity.go): once more when the oldest has.
		return max(d.youngIn+crossMargin, minQuick)
	}
	if d.waiting > 0 && d.quick < maxQuick && quickInterval < d.o.Interval {
		d.quick++
		q := quickInterval
		if d.crossIn > 0 && d.crossIn+crossMargin < q {
			q = max(d.crossIn+crossMargin, minQuick)
		}
		return q
	}
	d.quick = 0
	return d.o.Interval
}

// crossIn is how long until the waiting flows (waits: how long each has
// waited) hold enough silent ones to reach threshold: until the k-th
// longest-waiting one passes silentAfter, or, with fewer than k waiting,
// the longest-waiting one (new flows may join meanwhile). 0: none to wait
// for.
func crossIn(waits []time.Duration, threshold int) time.Duration {
	if len(waits) == 0 {
		return 0
	}
	k := max(1, (threshold+pointsPerSign-1)/pointsPerSign)
	slices.SortFunc(waits, func(a, b time.Duration) int { return cmp.Compare(b, a) })
	w := waits[0]
	if len(waits) >= k {
		w = waits[k-1]
	}
	if w >= silentAfter {
		return 0
	}
	return silentAfter - w
}

// suspectLocked says whether this sample asks for a suspect check (see
// suspectCooldown): flows are waiting for an answer, not yet silent enough
// to fire, and no suspect was asked for within suspectCooldown.
func (d *Detector) suspectLocked(now time.Time, waiting, silent int, fire bool) bool {
	if d.o.Suspect == nil || fire || waiting == 0 || silent*pointsPerSign >= d.o.Threshold {
		return false
	}
	if !d.suspected.IsZero() && now.Sub(d.suspected) < suspectCooldown && !now.Before(d.suspected) {
		return false
	}
	d.suspected = now
	return true
}

// suspectReason describes a suspect check request.
func suspectReason(waiting int) string {
	return fmt.Sprintf("EARLY_SUSPECT: %d proxy connections to relays waiting over %s for an answer after their data was acknowledged; checking now",
		waiting, waitingAfter)
}

// silentReason describes a firing caused by silent flows.
func silentReason(silent int, score, threshold int) string {
	return fmt.Sprintf("%d proxy connections to relays silent for over %s after their data was acknowledged (score %d >= %d)",
		silent, silentAfter, score, threshold)
}
