package daemon

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"surflare-watchdog/src/control"
	"surflare-watchdog/src/watchdog"
)

// stopDeadline bounds a stop from the signal to the exit: the init system
// is promised 5 s, and the kernel state (the kill switch) is already in
// place whatever is still running, so exiting then is safe.
const stopDeadline = 4500 * time.Millisecond

// serveControl answers the CLI on <run_dir>/surflare-watchdog.sock.
func serveControl(ctx context.Context, runDir string, d *Daemon) error {
	return control.Serve(ctx, control.SocketPath(runDir), control.HandlerFunc(d.handle))
}

// stopOnSignal waits for SIGTERM/SIGINT (ctx, from main) and stops the
// engine: with the kill switch kept, or, with --open-on-exit, removed.
// If the stop overruns stopDeadline the process exits anyway.
func (d *Daemon) stopOnSignal(ctx context.Context, cancel context.CancelFunc) {
	<-ctx.Done()
	time.AfterFunc(stopDeadline, func() {
		d.log.Error("Stop took longer than " + stopDeadline.String() + "; exiting now (the kill switch stays as it is)")
		os.Exit(1) // the CLI's exit code for a failed command
	})
	// An init script's restart (daemon_adopt.go): leave the tunnel.
	if handoverRequested(d.cfgs.Get().Paths.RunDir) && d.handover(HandoverFile) {
		return
	}
	if d.opts.OpenOnExit {
		sctx, scancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := d.w.Shutdown(sctx, true)
		scancel()
		if err == nil {
			return
		}
		d.log.Warn("Stopping with open failed (still starting?); stopping with the kill switch armed", "err", err)
	}
	cancel()
}

// forwardSignals maps SIGUSR1 (check now), SIGUSR2 (toggle diag) and
// SIGHUP (reload) onto the engine until ctx ends.
func (d *Daemon) forwardSignals(ctx context.Context) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP)
	defer signal.Stop(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case sig := <-ch:
			d.log.Info("Signal " + sig.String())
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := d.w.Signal(sctx, sig); err != nil {
				d.log.Warn("Signal "+sig.String()+" not applied", "err", err)
			}
			cancel()
		}
	}
}

// startEvents follows the engine's events: every transition pokes the
// proxy watch and the proxy tracker (a connect just started or finished a
// proxy) and is sent to ubus as surflare.state.
func (d *Daemon) startEvents(ctx context.Context) {
	poke := make(chan struct{}, 1)
	changed := d.fast.proxyChanges()
	every := time.Second
	if changed != nil {
		every = trackedProxyPoll
	}
	d.goAux(ctx, "proxy watch", func(ctx context.Context) error {
		d.dets.proxy.run(ctx, poke, changed, every)
		return nil
	})
	d.followEvents(ctx, "event follower", func(ctx context.Context, ev watchdog.Event) {
		since := ev.At
		if old := d.tunnel.Load(); old != nil && old.node == ev.Node {
			since = old.since
		}
		d.tunnel.Store(&tunnelView{node: ev.Node, transit: ev.Transit, since: since})
		if isNewTunnel(ev) {
			d.fast.newTunnel() // before the next line or check is judged
		}
		if ev.Type != watchdog.EventTransition {
			return
		}
		select {
		case poke <- struct{}{}:
		default:
		}
		d.fast.pokeTracker()
		if d.dets.learner != nil {
			d.dets.learner.Poke() // a new tunnel may use new relays
		}
		if d.fast != nil && d.fast.logs != nil {
			// A new state is a new question: the urltest of a
			// fresh tunnel may ask for its check at once.
			d.fast.logs.NewTunnel()
		}
		d.dets.override503.Follow(ev.Node)
		d.dets.probe503.NewTunnel() // a new state: ask the 503 question again at once
		d.publishState(ctx, ev)
	})
}

// followEvents runs fn on every engine event, in order, in a goroutine of
// its own, until ctx ends or the engine closes the subscription.
func (d *Daemon) followEvents(ctx context.Context, name string, fn func(context.Context, watchdog.Event)) {
	events, cancel := d.w.Subscribe()
	d.goAux(ctx, name, func(ctx context.Context) error {
		defer cancel()
		for {
			select {
			case <-ctx.Done():
				return nil
			case ev, ok := <-events:
				if !ok {
					return nil
				}
				fn(ctx, ev)
			}
		}
	})
}
