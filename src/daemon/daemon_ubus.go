package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"surflare-watchdog/src/api"
	"surflare-watchdog/src/credentials"
	"surflare-watchdog/src/nodeprobe"
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
	line := at.Format(time.DateTime) + " " + l.Level + " " + l.Message
	keys := make([]string, 0, len(l.Fields))
	for k := range l.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		line += " " + k + "=" + strconv.Quote(l.Fields[k])
	}
	r.lines = append(r.lines, line)
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

// argString is a string argument with surrounding blanks dropped (names
// typed by hand); never for a password.
func argString(req *ubus.Request, name string) string {
	s, _ := req.String(name)
	return strings.TrimSpace(s)
}

// ubusFailure answers a refused or failed call the way a libubus handler
// that replies and then fails does: {"error": why} as DATA, which `ubus
// call` prints, then the status, which is all LuCI and scripts look at.
func ubusFailure(st ubus.Status, err error) (ubus.Fields, error) {
	return ubus.Fields{{Name: "error", Value: ubus.String(err.Error())}}, fmt.Errorf("%w: %w", st, err)
}

// badArgument is an argument value the handler refuses (a node that is not
// a candidate, an unknown hotplug action, a password that cannot be
// stored): INVALID_ARGUMENT, as the policy check answers a wrong type.
func badArgument(err error) (ubus.Fields, error) {
	return ubusFailure(ubus.StatusInvalidArgument, err)
}

// commandStatus picks the status for an engine command's error. The
// engine refuses a command in a state that does not allow it (diag mode, a
// connect in progress, no other node): NOT_SUPPORTED, the web API's 400.
// Not running (starting or stopping) is the daemon's problem, as is a
// command it did not take in time.
func commandStatus(err error) ubus.Status {
	var st ubus.Status
	switch {
	case errors.As(err, &st):
		return st
	case errors.Is(err, context.DeadlineExceeded):
		return ubus.StatusTimeout
	case errors.Is(err, watchdog.ErrNotRunning), errors.Is(err, context.Canceled):
		return ubus.StatusUnknownError
	}
	return ubus.StatusNotSupported
}

// ubusHandlers are the surflare object's methods.
func (d *Daemon) ubusHandlers(tokens *api.Tokens) ubus.SurflareHandlers {
	// status answers an engine command with the state after it.
	status := func(ctx context.Context, err error) (ubus.Fields, error) {
		if err != nil {
			return ubusFailure(commandStatus(err), err)
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
			// The engine resolves the name (daemon_rotate.go): a typo is
			// INVALID_ARGUMENT and changes nothing.
			if err := d.w.Rotate(ctx, argString(req, "node")); err != nil {
				return ubusFailure(rotateStatus(err), err)
			}
			return status(ctx, nil)
		},
		ubus.MethodProbe: func(ctx context.Context, req *ubus.Request) (ubus.Fields, error) {
			// Probing takes seconds per node: start it in the background and
			// answer at once with the job's progress; a call while a probe
			// runs reports on that probe instead of starting another.
			var nodes []string
			if n := argString(req, "node"); n != "" {
				if !d.isCandidate(n) {
					return badArgument(fmt.Errorf("%q is not a candidate node (ubus call surflare nodes lists them)", n))
				}
				nodes = []string{n}
			}
			st, err := d.startProbe(nodes)
			if errors.Is(err, nodeprobe.ErrRunning) {
				st, err = d.probeJobs.Status(), nil
			}
			if err != nil {
				return ubusFailure(commandStatus(err), err)
			}
			return toFields(st)
		},
		ubus.MethodReconnect: func(ctx context.Context, _ *ubus.Request) (ubus.Fields, error) {
			return status(ctx, d.w.Reconnect(ctx))
		},
		ubus.MethodDiag: func(ctx context.Context, req *ubus.Request) (ubus.Fields, error) {
			on, _ := req.Bool("enable")
			return status(ctx, d.w.SetDiag(ctx, on))
		},
		ubus.MethodNodes: func(ctx context.Context, _ *ubus.Request) (ubus.Fields, error) {
			return toFields(map[string]any{"nodes": d.nodes()})
		},
		ubus.MethodReload: func(ctx context.Context, _ *ubus.Request) (ubus.Fields, error) {
			// a config that does not load is kept out: say why
			if err := d.w.ReloadFromSource(ctx); err != nil {
				return ubusFailure(ubus.StatusUnknownError, err)
			}
			return toFields(d.status(ctx))
		},
		ubus.MethodHistory: d.ubusHistory,
		ubus.MethodLog: func(ctx context.Context, req *ubus.Request) (ubus.Fields, error) {
			n := 50
			if v, ok := req.Args.Map()["lines"]; ok {
				fmt.Sscan(fmt.Sprint(v), &n)
			}
			return toFields(map[string]any{"lines": d.logs.last(n)})
		},
		ubus.MethodHotplug: func(ctx context.Context, req *ubus.Request) (ubus.Fields, error) {
			action := argString(req, "action")
			switch action {
			case "ifup", "ifupdate", "ifdown":
			default:
				return badArgument(fmt.Errorf("hotplug action %q: want ifup, ifupdate or ifdown", action))
			}
			return status(ctx, d.hotplug(ctx, action, argString(req, "interface"), argString(req, "device")))
		},
		// A token from the read ACL's `token` opens the read endpoints and
		// the websocket only; acting needs `token_write`, which only the
		// write ACL grants.
		ubus.MethodToken: func(ctx context.Context, _ *ubus.Request) (ubus.Fields, error) {
			return toFields(tokens.Grant(api.ScopeRead, tokenTTL))
		},
		ubus.MethodTokenWrite: func(ctx context.Context, _ *ubus.Request) (ubus.Fields, error) {
			return toFields(tokens.Grant(api.ScopeWrite, tokenTTL))
		},
		ubus.MethodSetCredentials: func(ctx context.Context, req *ubus.Request) (ubus.Fields, error) {
			// The password is stored as sent: blanks are part of it. An
			// empty username keeps the configured one (Store's rule).
			user := argString(req, "username")
			pw, _ := req.String("password")
			if err := credentials.ValidatePassword(pw); err != nil {
				return badArgument(err)
			}
			if user != "" {
				if err := credentials.ValidateUsername(user); err != nil {
					return badArgument(err)
				}
			}
			c := d.cfgs.Get()
			if err := credentials.Store(ctx, d.credOpts(c), user, pw); err != nil {
				return ubusFailure(ubus.StatusUnknownError, err)
			}
			// The username lives in the config: pick it up (and clear a
			// fatal login error, as a reload does).
			if err := d.w.ReloadFromSource(ctx); err != nil {
				return ubusFailure(ubus.StatusUnknownError, err)
			}
			return toFields(credentials.Status(d.credOpts(d.cfgs.Get())))
		},
	}
}

// hotplug handles hotplug.d/iface events for the WAN: ifdown pauses
// probing and rotation; ifup re-detects the WAN, re-applies our tables
// (fw4 rebuilds on interface events) and checks at once.
func (d *Daemon) hotplug(ctx context.Context, action, iface, device string) error {
	wan := d.wan()
	if !isWANInterface(d.cfgs.Get().Main.WANInterfaces, iface) && (device == "" || device != wan.Device) {
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

func (d *Daemon) nodes() []nodeRow {
	st := d.w.Status()
	out := make([]nodeRow, 0, len(st.Candidates))
	for _, c := range withProbeLatency(st.Candidates, d.cfgs.Get().Paths.RunDir) {
		out = append(out, nodeRow{CandidateStatus: c, Transit: st.Transit})
	}
	return out
}

// stateNotification is the notification type `ubus subscribe surflare`
// receives on every transition (the same members as surflare.state).
const stateNotification = "state"

// publishState sends surflare.state on ubus for a transition, and notifies
// the surflare object's subscribers (a no-op without any).
func (d *Daemon) publishState(ctx context.Context, ev watchdog.Event) {
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
	for _, obj := range d.ubus.Objects {
		if err := d.ubus.Notify(obj, stateNotification, f); err != nil && !errors.Is(err, ubus.ErrNotConnected) {
			d.log.Debug("ubus notification not sent", "err", err)
		}
	}
}

// isWANInterface reports whether iface is one of the configured uplinks
// (`list wan_interface`; an item may also hold several space-separated
// names, as the shell hooks accept).
func isWANInterface(wans []string, iface string) bool {
	for _, item := range wans {
		for _, name := range strings.Fields(item) {
			if name == iface {
				return true
			}
		}
	}
	return false
}
