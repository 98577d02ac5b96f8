package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"surflare-watchdog/src/api"
	"surflare-watchdog/src/config"
	"surflare-watchdog/src/credentials"
	"surflare-watchdog/src/route"
	"surflare-watchdog/src/ubus"
	"surflare-watchdog/src/watchdog"
)

// apiBackend is api.Backend (and api.Subscriber) over the daemon.
type apiBackend struct{ d *Daemon }

func (b apiBackend) Status(ctx context.Context) (any, error) { return b.d.status(ctx), nil }
func (b apiBackend) Nodes(ctx context.Context) (any, error)  { return b.d.nodes(), nil }
func (b apiBackend) Check(ctx context.Context) error         { return badRequest(b.d.w.Check(ctx)) }

// Rotate: the engine resolves the name (daemon_rotate.go); an unknown one
// is a 400 like every refusal.
func (b apiBackend) Rotate(ctx context.Context, node string) error {
	return badRequest(b.d.w.Rotate(ctx, node))
}
func (b apiBackend) Reconnect(ctx context.Context) error { return badRequest(b.d.w.Reconnect(ctx)) }
func (b apiBackend) SetDiag(ctx context.Context, on bool) error {
	return badRequest(b.d.w.SetDiag(ctx, on))
}

// badRequest marks refusals caused by the current mode as the caller's
// problem (HTTP 400), not the daemon's (500).
func badRequest(err error) error {
	if err == nil || errors.Is(err, watchdog.ErrNotRunning) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", api.ErrBadRequest, err)
}

func (d *Daemon) isCandidate(node string) bool {
	for _, c := range d.w.Status().Candidates {
		if c.Node == node {
			return true
		}
	}
	return false
}

// Subscribe is api.Subscriber: the engine's events as the live view's.
func (b apiBackend) Subscribe() (<-chan api.Event, func()) {
	in, cancel := b.d.w.Subscribe()
	out := make(chan api.Event, 64)
	go func() {
		defer close(out)
		for ev := range in {
			e := api.Event{Time: ev.At}
			switch {
			case ev.Transition != nil:
				e.Kind, e.Data = api.KindTransition, ev.Transition
			case ev.Health != nil:
				e.Kind, e.Data = api.KindHealth, ev.Health
			case ev.Log != nil:
				e.Kind, e.Data = api.KindLog, ev.Log
			default:
				continue
			}
			select {
			case out <- e:
			default: // the hub is behind: drop, as the engine does
			}
		}
	}()
	return out, cancel
}

// startFrontends starts ubus (router) and the web API (when enabled), and
// the log ring for `ubus call surflare log`.
func (d *Daemon) startFrontends(ctx context.Context, c *config.Config) {
	d.followEvents(ctx, "log ring", func(_ context.Context, ev watchdog.Event) {
		if ev.Log != nil {
			d.logs.add(ev.At, ev.Log)
		}
	})
	tokens := api.NewTokens(nil)
	var static string
	if c.Web.TokenFile != "" {
		tok, err := api.LoadTokenFile(c.Web.TokenFile, d.log)
		if err != nil {
			d.log.Warn("Web token file unusable; the API accepts only ubus-minted tokens", "err", err)
		} else if err := tokens.AddStatic(tok); err != nil {
			d.log.Warn("Web token file unusable; the API accepts only ubus-minted tokens", "err", err)
		} else {
			static = tok
		}
	}
	if d.role == string(config.RoleRouter) {
		obj, err := ubus.SurflareObject(d.ubusHandlers(tokens))
		if err != nil {
			d.log.Error("ubus object", "err", err)
		} else {
			d.ubus = &ubus.Service{Socket: c.Paths.UbusSocket, Objects: []*ubus.Object{obj}}
			d.goAux(ctx, "ubus", d.ubus.Run)
			// LuCI's live view (`surflare events`) and `ubus subscribe
			// surflare`: checks and log lines too (transitions go out as
			// "state" in publishState).
			d.followEvents(ctx, "ubus feed", func(_ context.Context, ev watchdog.Event) {
				var err error
				switch {
				case ev.Health != nil:
					err = d.ubus.Publish(obj, ubus.NotifyHealth, ev.At, ev.Health)
				case ev.Log != nil:
					err = d.ubus.Publish(obj, ubus.NotifyLog, ev.At, ev.Log)
				}
				if err != nil && !errors.Is(err, ubus.ErrNotConnected) {
					d.log.Debug("ubus notification not sent", "err", err)
				}
			})
		}
	}
	if !c.Web.Enabled {
		return
	}
	var lan netip.Addr
	if d.role == string(config.RoleRouter) {
		lan, _, _ = route.LANGateway(c.Main.LANInterface, netip.Prefix{})
	}
	d.webAddr = api.ListenAddress(c.Web, lan)
	copts := d.credOpts(c)
	srv, err := api.NewServer(api.Options{
		Backend:        apiBackend{d},
		Tokens:         tokens,
		Listen:         d.webAddr,
		AllowHostWebUI: d.role == string(config.RoleRouter),
		Secrets: func() []string {
			s := []string{static, copts.Username}
			if pw, err := credentials.Password(copts)(); err == nil {
				s = append(s, pw)
			}
			return s
		},
	})
	if err != nil {
		d.log.Error("Web API disabled", "err", err)
		return
	}
	d.goAux(ctx, "web API", srv.Serve)
}
