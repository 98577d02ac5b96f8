package watchdog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ErrProbing: the command would change the tunnel while a node probe holds
// the vendor.
var ErrProbing = errors.New("a node probe is running; wait for it to finish")

// LendVendor pauses supervision and lends the vendor to fn, for a node
// probe that switches the vendor from node to node itself. It returns fn's
// error, or why the vendor could not be lent.
//
// While fn runs the state is "probing": no check, rotation or reconnect
// starts, and user commands that would move the tunnel (rotate, reconnect,
// check) are refused with ErrProbing. The firewall is not touched, so the
// kill switch stays armed and the LAN goes through whichever node is being
// measured, or nowhere. A connect or check in flight is cancelled first; fn
// starts once the vendor is free. fn gets the node the tunnel was on, and a
// context that ends when the watchdog stops.
//
// When fn returns, the watchdog reconnects to that node with its full
// connect sequence (data plane proven, LAN tables restored) and resumes
// supervision. The vendor is refused while there is nothing sound to come
// back to: diag mode, WAN down, storm cooldown, an authentication problem,
// or another probe.
func (w *Watchdog) LendVendor(ctx context.Context, fn func(ctx context.Context, node string) error) error {
	var (
		node  string
		wait  chan struct{}
		opCtx context.Context
	)
	err := w.do(ctx, func() error {
		if err := w.lendRefusalLocked(); err != nil {
			return err
		}
		w.f.probing = true
		w.cancelCheckLocked()
		if w.vendorCancel != nil {
			w.vendorCancel()
		}
		w.vendorGen++ // a connect in flight is moot
		wait = w.vendorDone
		w.f.connecting, w.f.connected = false, false
		w.retryAt, w.nextCheckAt = time.Time{}, time.Time{}
		node, opCtx = w.node, w.opCtx
		w.logLocked(slog.LevelInfo, "Node probe: supervision paused (kill switch stays armed), tunnel on "+node)
		w.updateLocked("node probe")
		return nil
	})
	if err != nil {
		return err
	}
	if wait != nil {
		select {
		case <-wait:
		case <-opCtx.Done():
		}
	}
	fctx, cancel := context.WithCancel(opCtx)
	stop := context.AfterFunc(ctx, cancel)
	ferr := fn(fctx, node)
	stop()
	cancel()

	// Resume even when the caller has gone: the tunnel must come back.
	rerr := w.do(context.WithoutCancel(ctx), func() error {
		w.f.probing = false
		if w.f.stopping || w.shutdown {
			return nil
		}
		w.logLocked(slog.LevelInfo, "Node probe finished: back to "+node)
		w.userConnectLocked(node, "node probe finished")
		return nil
	})
	if ferr != nil {
		return ferr
	}
	if rerr != nil && !errors.Is(rerr, ErrNotRunning) {
		return fmt.Errorf("resuming after the probe: %w", rerr)
	}
	return nil
}

// lendRefusalLocked says why the vendor cannot be lent now, nil if it can.
func (w *Watchdog) lendRefusalLocked() error {
	a := w.f.auth
	now := w.clock.Now()
	switch {
	case w.f.probing:
		return ErrProbing
	case w.f.stopping || w.shutdown:
		return ErrNotRunning
	case w.f.diag:
		return ErrDiag
	case w.f.wanDown || w.f.wanDownProbed:
		return errors.New("the WAN is down; nothing to probe")
	case now.Before(w.f.cooldownUntil):
		return errors.New("storm cooldown: rotate or reconnect first")
	case a.failOpen, a.fatal, a.needed, a.running, now.Before(a.subscriptionUntil):
		return errors.New("the vendor session is not usable (authentication); fix it first")
	}
	return nil
}
