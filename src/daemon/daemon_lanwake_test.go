package daemon

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"testing"

	"github.com/vishvananda/netns"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/loopguard/nflog"
)

// On a router the early detector's wake-ups are bound in the daemon's own
// namespace (the one whose sw_lan_tproxy holds the lan-wake rule): while
// they are held nobody else can bind the group there, and closing them
// frees it. A laptop has no LAN tproxy and binds nothing.
func TestLANWakeBindsTheGroupOnARouterOnly(t *testing.T) {
	ns := emptyNetNS(t)
	inNS := func(fn func()) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread() // not unlocked: the thread exits with the goroutine
			if err := netns.Set(ns); err != nil {
				t.Errorf("entering the test namespace: %v", err)
				return
			}
			fn()
		}()
		<-done
	}
	ctx := t.Context()
	d := &Daemon{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	parse := func(file string) *config.Config {
		c, _, err := config.Parse("surflare", []byte(file))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	bindable := func() bool {
		var sub *nflog.Sub
		var err error
		inNS(func() { sub, err = nflog.Subscribe(context.Background(), firewall.LANWakeLogGroup) })
		if err == nil {
			sub.Close()
		}
		return err == nil
	}

	var sub *nflog.Sub
	inNS(func() { sub = d.lanWake(ctx, parse("config surflare 'main'\n\toption role 'router'\n")) })
	if sub == nil {
		t.Fatal("router: no wake-up subscription")
	}
	if bindable() {
		t.Errorf("router: group %d is free while the detector holds it", firewall.LANWakeLogGroup)
	}
	sub.Close()
	if !bindable() {
		t.Errorf("closed: group %d is still bound", firewall.LANWakeLogGroup)
	}

	inNS(func() { sub = d.lanWake(ctx, parse("config surflare 'main'\n\toption role 'laptop'\n")) })
	if sub != nil {
		sub.Close()
		t.Error("laptop: a wake-up subscription without a LAN tproxy")
	}
}
