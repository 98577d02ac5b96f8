package firewall

import (
	"context"
	"maps"
	"testing"
)

// FastCounters reads the same packet counts as the google/nftables reads
// it replaces (KillSwitchCounters, MoatCounters), after real packets moved
// them; with one table gone it still reads the other, with both gone it
// fails, and after the tables come back it reads them again (a fresh
// socket or the kept one).
func TestFastCountersReadWhatThePacketsCounted(t *testing.T) {
	ctx := context.Background()
	tp := newTopo(t)
	serveTCP(t, tp.inet, "tcp4", relayHost+":8443", "relay", false)
	fw := newFW(tp.router)
	if _, err := fw.Apply(ctx, labSpec()); err != nil {
		t.Fatal(err)
	}
	if got, err := dialTCP(tp.router, "tcp4", relayHost+":8443", int(MarkDirect)); got != "relay" {
		t.Fatalf("relay: %q %v", got, err)
	}
	if _, err := dialTCP(tp.router, "tcp4", relayHost+":9", int(MarkDirect)); !isRefused(err) {
		t.Fatalf("closed relay port: %v", err)
	}
	// Unmarked router traffic to a host that is no relay: the kill switch drops it.
	if _, err := dialTCP(tp.router, "tcp4", echoHost+":80", 0); err == nil {
		t.Fatal("the kill switch let unmarked router traffic out")
	}

	got := map[string]uint64{}
	if err := fw.FastCounters(ctx, got); err != nil {
		t.Fatal(err)
	}
	ks, err := fw.KillSwitchCounters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := fw.MoatCounters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got[CounterRstIn] != 1 || got[CounterSynOut] != 2 || got[CounterSynAckIn] != 1 || m.RstIn != 1 {
		t.Errorf("moat by FastCounters %v, by MoatCounters %+v; want 1 RST, 2 SYNs, 1 SYN-ACK", got, m)
	}
	if got[CounterBlockedOut] == 0 {
		t.Errorf("blocked_out = 0 after a dropped dial: %v", got)
	}
	for name, v := range ks {
		if got[name] != v {
			t.Errorf("%s: FastCounters %d, KillSwitchCounters %d", name, got[name], v)
		}
	}

	// Again on the kept socket: the same counts (nothing moved).
	again := map[string]uint64{}
	if err := fw.FastCounters(ctx, again); err != nil || !maps.Equal(again, got) {
		t.Errorf("second read %v, %v; want %v", again, err, got)
	}

	tp.router.nft("delete", "table", "inet", TableMoat)
	onlyKS := map[string]uint64{}
	if err := fw.FastCounters(ctx, onlyKS); err != nil {
		t.Errorf("with the moat gone: %v; want the kill switch's counters and no error", err)
	}
	if _, ok := onlyKS[CounterRstIn]; ok || onlyKS[CounterBlockedOut] != got[CounterBlockedOut] {
		t.Errorf("with the moat gone: %v", onlyKS)
	}
	tp.router.nft("delete", "table", "inet", TableKillSwitch)
	if err := fw.FastCounters(ctx, map[string]uint64{}); err == nil {
		t.Error("both tables gone, and no error")
	}
	if _, err := fw.Apply(ctx, labSpec()); err != nil {
		t.Fatal(err)
	}
	back := map[string]uint64{}
	if err := fw.FastCounters(ctx, back); err != nil || len(back) != len(got) {
		t.Errorf("after the tables came back: %v, %v; want %d counters", back, err, len(got))
	}
}
