package watchdog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"surflare-watchdog/src/surflare"
)

// HandleCommand serves one control-socket (or ubus) request. cmd wraps it in
// a control.Handler. Commands and their arguments:
//
//	status                      the Status snapshot
//	check      {"wait": BOOL}   health check now
//	rotate     {"node": NAME, "wait": BOOL}
//	                            rotate to NAME (as typed: resolveNode), or to the next candidate without it
//	reconnect  {"wait": BOOL}   reconnect to the current node
//	diag       {"on": BOOL}     diag mode on or off ("on"/"off" strings too); no argument toggles
//	reload                      re-read the config
//	wan        {"up": BOOL}     WAN hotplug events
//	stop       {"open": BOOL}   stop the daemon; open also removes the kill switch
//
// Every command but status returns the Status snapshot taken after it;
// check, rotate and reconnect with wait return their Outcome instead, once
// they have played out (useraction.go). A refusal (an unknown node, diag
// mode) is an error either way, and changes nothing.
func (w *Watchdog) HandleCommand(ctx context.Context, cmd string, args map[string]any) (any, error) {
	wait, _, err := boolArg(args, "wait")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	var out Outcome
	switch cmd {
	case "status":
		return w.Status(), nil
	case "check":
		if wait {
			out, err = w.CheckAndWait(ctx)
		} else {
			err = w.Check(ctx)
		}
	case "rotate":
		var node string
		if node, err = stringArg(args, "node"); err == nil {
			if wait {
				out, err = w.RotateAndWait(ctx, node)
			} else {
				err = w.Rotate(ctx, node)
			}
		}
	case "reconnect":
		if wait {
			out, err = w.ReconnectAndWait(ctx)
		} else {
			err = w.Reconnect(ctx)
		}
	case "diag":
		var on, set bool
		if on, set, err = boolArg(args, "on"); err == nil {
			if set {
				err = w.SetDiag(ctx, on)
			} else {
				err = w.ToggleDiag(ctx)
			}
		}
	case "reload":
		err = w.ReloadFromSource(ctx)
	case "wan":
		var up, set bool
		if up, set, err = boolArg(args, "up"); err == nil {
			switch {
			case !set:
				err = fmt.Errorf("wan: argument \"up\" (true or false) is required")
			case up:
				err = w.WANUp(ctx)
			default:
				err = w.WANDown(ctx)
			}
		}
	case "stop":
		var open bool
		if open, _, err = boolArg(args, "open"); err == nil {
			err = w.Shutdown(ctx, open)
		}
	default:
		return nil, fmt.Errorf("unknown command %q (status, check, rotate, reconnect, diag, reload, wan, stop)", cmd)
	}
	var unknown *surflare.UnknownNodeError
	switch {
	case errors.As(err, &unknown):
		return nil, err // says what it is: `rotate: unknown node "Narnia"` would say it twice
	case err != nil:
		return nil, fmt.Errorf("%s: %w", cmd, err)
	case out.Action != "":
		return out, nil
	}
	return w.Status(), nil
}

func stringArg(args map[string]any, name string) (string, error) {
	v, ok := args[name]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("argument %q must be a string, got %T", name, v)
	}
	return strings.TrimSpace(s), nil
}

func boolArg(args map[string]any, name string) (val, set bool, err error) {
	v, ok := args[name]
	if !ok || v == nil {
		return false, false, nil
	}
	switch x := v.(type) {
	case bool:
		return x, true, nil
	case string:
		switch strings.ToLower(x) {
		case "on", "true", "1", "yes":
			return true, true, nil
		case "off", "false", "0", "no":
			return false, true, nil
		}
	case float64:
		return x != 0, true, nil
	}
	return false, false, fmt.Errorf("argument %q must be true/false or on/off, got %v", name, v)
}
