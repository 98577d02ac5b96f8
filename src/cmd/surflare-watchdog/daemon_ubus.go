package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"surflare-watchdog/src/api"
	"surflare-watchdog/src/credentials"
	"surflare-watchdog/src/ubus"
	"surflare-watchdog/src/watchdog"
)

// tokenTTL is the life of a live-view token handed out over ubus (LuCI
// asks for a fresh one each time the page opens).
const tokenTTL = time.Hour

// logRing keeps the last user-facing log lines for `ubus call surflare
// log` (the full log goes to logd through procd).
type logRing struct {
	mu    sync.Mutex
	lines []string
}

const logRingSize = 500

func (r *logRing) add(at time.Time, l *watchdog.LogLine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, at.Format(time.DateTime)+" "+l.Level+" "+l.Message)
	if n := len(r.lines) - logRingSize; n > 0 {
		r.lines = append([]string(nil), r.lines[n:]...)
	}
}

func (r *logRing) last(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n <= 0 || n > len(r.lines) {
		n = len(r.lines)
	}
	return append([]string{}, r.lines[len(r.lines)-n:]...)
}

// toFields turns any JSON-marshalable value into a ubus reply.
func toFields(v any) (ubus.Fields, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(b) > 0 && b[0] != '{' {
		b = append(append([]byte(`{"result":`), b...), '}')
	}
	return ubus.ParseJSON(b)
}

func argString(req *ubus.Request, name string) string {
	s, _ := req.Args.Map()[name].(string)
	return strings.TrimSpace(s)
}

// ubusHandlers are the surflare object's methods. probe has no handler:
// per-node probing is not implemented yet (ubus answers NOT_SUPPORTED).
func (d *daemon) ubusHandlers(tokens *api.Tokens) ubus.SurflareHandlers {
	status := func(ctx context.Context, err error) (ubus.Fields, error) {
		if err != nil {
			return nil, err
		}
		return toFields(d.status(ctx))
	}
	return ubus.SurflareHandlers{
		ubus.MethodStatus: func(ctx context.Context, _ *ubus.Request) (ubus.Fields, error) {
			return status(ctx, nil)
		},
		ubus.MethodCheck: func(ctx context.Context, _ *ubus.Request) (ubus.Fields, error) {
			return status(ctx, d.w.Check(ctx))
		},
		ubus.MethodRotate: func(ctx context.Context, req *ubus.Request) (ubus.Fields, error) {
			return status(ctx, d.w.Rotate(ctx, argString(req, "node")))
		},
		ubus.MethodReconnect: func(ctx context.Context, _ *ubus.Request) (ubus.Fields, error) {
			return status(ctx, d.w.Reconnect(ctx))
		},
		ubus.MethodDiag: func(ctx context.Context, req *ubus.Request) (ubus.Fields, error) {
			on, _ := req.Args.Map()["enable"].(bool)
			return status(ctx, d.w.SetDiag(ctx, on))
		},
		ubus.MethodNodes: func(ctx context.Context, _ *ubus.Request) (ubus.Fields, error) {
			return toFields(map[string]any{"nodes": d.nodes()})
		},
		ubus.MethodReload: func(ctx context.Context, _ *ubus.Request) (ubus.Fields, error) {
			return status(ctx, d.w.ReloadFromSource(ctx))
		},
		ubus.MethodLog: func(ctx context.Context, req *ubus.Request) (ubus.Fields, error) {
			n := 50
			if v, ok := req.Args.Map()["lines"]; ok {
				fmt.Sscan(fmt.Sprint(v), &n)
			}
			return toFields(map[string]any{"lines": d.logs.last(n)})
		},
		ubus.MethodHotplug: func(ctx context.Context, req *ubus.Request) (ubus.Fields, error) {
			return status(ctx, d.hotplug(ctx, argString(req, "action"), argString(req, "interface"), argString(req, "device")))
		},
		ubus.MethodToken: func(ctx context.Context, _ *ubus.Request) (ubus.Fields, error) {
			return toFields(map[string]any{"token": tokens.Mint(tokenTTL), "expires_in": int(tokenTTL / time.Second)})
		},
		ubus.MethodSetCredentials: func(ctx context.Context, req *ubus.Request) (ubus.Fields, error) {
			c := d.cfgs.Get()
			if err := credentials.Store(ctx, d.credOpts(c), argString(req, "username"), argString(req, "password")); err != nil {
				return nil, err
			}
			// The username lives in the config: pick it up (and clear a
			// fatal login error, as a reload does).
			if err := d.w.ReloadFromSource(ctx); err != nil {
				return nil, err
			}
			return toFields(credentials.Status(d.credOpts(d.cfgs.Get())))
		},
	}
}

// hotplug handles hotplug.d/iface events for the WAN: ifdown pauses
// probing and rotation; ifup re-detects the WAN, re-applies our tables
// (fw4 rebuilds on interface events) and checks at once.
func (d *daemon) hotplug(ctx context.Context, action, iface, device string) error {
	wan := d.wan()
	if iface != "wan" && iface != "wan6" && (device == "" || device != wan.Device) {
		return nil // not our uplink
	}
	switch action {
	case "ifdown":
		return d.w.WANDown(ctx)
	case "ifup", "ifupdate":
		d.setWAN(detectWAN(ctx, d.cfgs.Get(), d.log))
		if err := d.fw.SetBase(ctx, d.fw.Base()); err != nil {
			d.log.Warn("Hotplug: re-applying the firewall failed", "err", err)
		}
		if err := d.w.WANUp(ctx); err != nil {
			return err
		}
		if err := d.w.Check(ctx); err != nil && !errors.Is(err, watchdog.ErrNotRunning) {
			d.log.Info("Hotplug: no check now", "err", err)
		}
		return nil
	}
	return fmt.Errorf("hotplug action %q: want ifup, ifupdate or ifdown", action)
}

// nodeRow is one candidate of the nodes table.
type nodeRow struct {
	watchdog.CandidateStatus
	Transit string `json:"transit"`
}

func (d *daemon) nodes() []nodeRow {
	st := d.w.Status()
	out := make([]nodeRow, 0, len(st.Candidates))
	for _, c := range st.Candidates {
		out = append(out, nodeRow{CandidateStatus: c, Transit: st.Transit})
	}
	return out
}

// publishState sends surflare.state on ubus for a transition.
func (d *daemon) publishState(ctx context.Context, ev watchdog.Event) {
	if d.ubus == nil || ev.Transition == nil {
		return
	}
	st := d.w.Status()
	f, err := toFields(map[string]any{"state": ev.Transition.To, "from": ev.Transition.From,
		"reason": ev.Transition.Reason, "node": st.Node, "exit": st.Exit})
	if err != nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := d.ubus.SendEvent(sctx, ubus.EventState, f); err != nil && !errors.Is(err, ubus.ErrNotConnected) {
		d.log.Debug("ubus event not sent", "err", err)
	}
}
