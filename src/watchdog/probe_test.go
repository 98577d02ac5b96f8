package watchdog

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A node probe borrows the vendor: supervision pauses (no checks, no
// rotation even though the probed node is dead), tunnel-moving commands are
// refused, the kill switch is never touched, and afterwards the original
// node is reconnected and proven healthy.
func TestLendVendorPausesAndRestoresNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.dead["Chicago"] = true
		h := start(t, testSettings(t), wd)
		h.advance(time.Minute)
		h.requireState(StateHealthy)
		before := wd.get()

		probed := make(chan struct{})
		release := make(chan struct{})
		var gotNode string
		done := make(chan error, 1)
		go func() {
			done <- h.w.LendVendor(t.Context(), func(ctx context.Context, node string) error {
				gotNode = node
				v := fakeVendor{wd}
				for _, n := range []string{"Los Angeles", "Chicago"} {
					v.Disconnect(ctx)
					v.Connect(ctx, n, "rule", "auto")
				}
				close(probed)
				<-release
				return nil
			})
		}()
		<-probed
		h.advance(10 * time.Minute) // the probe takes its time; Chicago is dead
		h.requireState(StateProbing)
		during := wd.get()
		if during.checks != before.checks {
			t.Errorf("%d health checks ran during the probe", during.checks-before.checks)
		}
		for _, c := range during.calls[len(before.calls):] {
			if strings.HasPrefix(c, "fw.") {
				t.Errorf("the probe's pause touched the firewall: %s", c)
			}
		}
		for _, err := range []error{h.w.Rotate(t.Context(), "Miami"), h.w.Reconnect(t.Context()), h.w.Check(t.Context())} {
			if !errors.Is(err, ErrProbing) {
				t.Errorf("tunnel command during a probe: %v, want ErrProbing", err)
			}
		}
		if err := h.w.LendVendor(t.Context(), func(context.Context, string) error { return nil }); !errors.Is(err, ErrProbing) {
			t.Errorf("second probe: %v, want ErrProbing", err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		h.advance(time.Minute)
		if gotNode != "Dallas" {
			t.Errorf("fn got node %q, want Dallas", gotNode)
		}
		if c := h.connects(); !slices.Equal(c, []string{"Dallas", "Los Angeles", "Chicago", "Dallas"}) {
			t.Errorf("connects = %q, want the probe's two then Dallas again", c)
		}
		h.requireState(StateHealthy)
		if st := h.w.Status(); st.Node != "Dallas" || st.Counters.Rotations != 0 {
			t.Errorf("after the probe: node %s, rotations %d", st.Node, st.Counters.Rotations)
		}
		if wd.get().connected != "Dallas" {
			t.Errorf("vendor left on %q", wd.get().connected)
		}
		h.stop()
	})
}

// The vendor is not lent when there is nothing sound to return to, and a
// probe's error comes back to the caller after the node is restored.
func TestLendVendorRefusalsAndErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		h.advance(time.Minute)
		h.w.SetDiag(t.Context(), true)
		ran := false
		if err := h.w.LendVendor(t.Context(), func(context.Context, string) error { ran = true; return nil }); !errors.Is(err, ErrDiag) || ran {
			t.Errorf("probe in diag mode: err %v, ran %v", err, ran)
		}
		h.w.SetDiag(t.Context(), false)
		h.advance(time.Minute)
		boom := errors.New("boom")
		if err := h.w.LendVendor(t.Context(), func(context.Context, string) error { return boom }); !errors.Is(err, boom) {
			t.Errorf("probe error: %v", err)
		}
		h.advance(time.Minute)
		h.requireState(StateHealthy)
		h.stop()
	})
}
