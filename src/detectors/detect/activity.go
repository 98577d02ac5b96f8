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
// is nothing for a black-hole to break that the periodic checks would not
// find. Between samples Run reads Activity every lookInterval (one small
// procfs read, far cheaper than a sample's fd scan and sock_diag dump) and
// samples at once when it moved by activityBurst.
const lookInterval = 250 * time.Millisecond

// activityBurst is how many new connections within one look count as LAN
// traffic. The engine's own requests through the tunnel come one at a
// time (the 503 probe every 2 s, the idle probe) and must not turn the
// quiet tunnel's sampling into a 250 ms poll; a household using the
// tunnel opens connections by the dozen per page. A health check's burst
// of probes also counts, once per check.
const activityBurst = 2

// waitActive waits up to wait, cut short after the first look that sees
// Activity move; false when ctx ended.
func (d *Detector) waitActive(ctx context.Context, wait time.Duration) bool {
	if d.o.Activity == nil || wait <= lookInterval {
		select {
		case <-ctx.Done():
			return false
		case <-d.o.Clock.After(wait):
			return true
		}
	}
	d.moved() // the reading the looks compare against
	deadline := d.o.Clock.Now().Add(wait)
	for {
		step := min(lookInterval, deadline.Sub(d.o.Clock.Now()))
		if step <= 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-d.o.Clock.After(step):
		}
		if d.moved() {
			return true
		}
	}
}

// moved reads Activity and reports whether it rose by activityBurst since
// the last reading. A failed reading, or a counter that went back (a new
// proxy in a new namespace), is no movement: the next Interval sample
// still comes (and finds the proxy gone, if it is).
func (d *Detector) moved() bool {
	v, err := d.o.Activity()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.activityOK = false
		return false
	}
	moved := d.activityOK && v >= d.activity+activityBurst
	d.activity, d.activityOK = v, true
	return moved
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
