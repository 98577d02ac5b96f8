package detect

import (
	"fmt"
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
	// waitingAfter makes a sample look again sooner (quickInterval): flows
	// waiting this long for an answer may be the start of a black-hole.
	waitingAfter = 300 * time.Millisecond
	// quickInterval is the re-sample delay while flows are waiting, and
	// maxQuick bounds how many quick samples follow each other before one
	// full Interval (a long-poll that never answers must not turn the
	// detector into a fast poller).
	quickInterval = 500 * time.Millisecond
	maxQuick      = 4
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

// nextInterval is the wait before the next sample: Interval, or
// quickInterval while flows are waiting for an answer and fewer than
// maxQuick quick samples came in a row.
func (d *Detector) nextInterval() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.waiting > 0 && d.quick < maxQuick && quickInterval < d.o.Interval {
		d.quick++
		return quickInterval
	}
	d.quick = 0
	return d.o.Interval
}

// silentReason describes a firing caused by silent flows.
func silentReason(silent int, score, threshold int) string {
	return fmt.Sprintf("%d proxy connections to relays silent for over %s after their data was acknowledged (score %d >= %d)",
		silent, silentAfter, score, threshold)
}
