package main

import (
	"context"
	"os"
	"testing"
	"time"

	"surflare-watchdog/src/lab"
)

// The demo's start: its LAN client's first request comes right after the
// daemon was started. It must not leave the lab directly (exit country CN,
// counted as a leak): the daemon's kill switch is armed before the client
// loop begins.
func TestDemoFirstRequestDoesNotLeak(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the demo runs a lab in network namespaces")
	}
	if testing.Short() {
		t.Skip("-short: the demo needs the lab binaries built")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, lab.Options{Clients: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	d := &demo{l: l, daemon: true}
	if err := d.startDaemon(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.StopDaemon(context.Background()) })

	// The client loop's first request, as it makes it.
	fctx, fcancel := context.WithTimeout(ctx, 2*time.Second)
	f := l.ClientFetch(fctx, 0, lab.EchoURL(0))
	fcancel()
	t.Logf("first request: %s", describeFetch(f))
	if e, err := lab.ParseEcho(f.Body); f.Err == nil && err == nil && lab.ExitName(e.IP) == "" {
		t.Errorf("the first request went out directly: %s", describeFetch(f))
	}
	lc, err := d.leakCheck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lc.Total() != 0 {
		t.Errorf("leaked at start: %s\ndaemon log:\n%s", lc, l.DaemonLog())
	}
}

func TestJudgeTourStep(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64, ok bool) fetchRecord {
		return fetchRecord{t0.Add(time.Duration(s * float64(time.Second))), ok}
	}
	if o := judge([]fetchRecord{at(0, true), at(1, true)}); !o.recovered || o.failed != 0 {
		t.Errorf("no failure: %+v", o)
	}
	o := judge([]fetchRecord{at(0, true), at(1, false), at(2, false), at(3, true), at(4, false), at(5.5, true)})
	if !o.recovered || o.failed != 3 || o.outage != 4500*time.Millisecond {
		t.Errorf("outage from the first failure to the success after the last: %+v", o)
	}
	if o := judge([]fetchRecord{at(0, true), at(1, false)}); o.recovered || o.failed != 1 {
		t.Errorf("still failing: %+v", o)
	}
}
