package surflare

import (
	"context"
	"strings"
)

// State is the classification of `surflare status`.
type State string

// The five classes the watchdog acts on.
const (
	StateConnected    State = "connected"
	StateDisconnected State = "disconnected"
	// StateAuthNeeded: log in (in the background) before connecting.
	StateAuthNeeded State = "auth_needed"
	// StateSubscriptionInactive: wait out the subscription cooldown; never
	// log in, which cannot help and counts against the account.
	StateSubscriptionInactive State = "subscription_inactive"
	// StateUnknown: exit 0 but output we do not recognise; the caller keeps
	// its previous belief and relies on health checks.
	StateUnknown State = "unknown"
)

// Status is the parsed output of `surflare status`.
type Status struct {
	State    State  `json:"state"`
	Node     string `json:"node,omitempty"`
	Transit  string `json:"transit,omitempty"`
	Mode     string `json:"mode,omitempty"`
	ExitCode int    `json:"exit_code"`
	TimedOut bool   `json:"timed_out,omitempty"`
	// Reason is the pattern or condition that decided State.
	Reason string `json:"reason,omitempty"`
}

// Status runs `surflare status` and classifies it. Following the contract, a
// timeout (exit 124) or any non-zero exit counts as "auth needed": the CLI
// blocks on a dead session far more often than it fails for other reasons,
// and a login attempt is harmless when the session was fine. The error is
// only for failing to run the CLI at all or for ctx ending.
func (c *Client) Status(ctx context.Context) (Status, error) {
	r, err := c.run(ctx, c.opts.Timeout, "status")
	if err != nil {
		return Status{State: StateUnknown, Reason: err.Error()}, err
	}
	return c.classifyStatus(r), nil
}

func (c *Client) classifyStatus(r result) Status {
	s := Status{ExitCode: r.code, TimedOut: r.timedOut}
	for _, line := range strings.Split(r.out, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "node":
			s.Node = v
		case "transit":
			s.Transit = v
		case "mode":
			s.Mode = v
		}
	}
	if p, ok := contains(r.out, c.pat.SubscriptionInactive); ok {
		s.State, s.Reason = StateSubscriptionInactive, p
		return s
	}
	if p, ok := contains(r.out, c.pat.AuthNeeded); ok {
		s.State, s.Reason = StateAuthNeeded, p
		return s
	}
	switch {
	case r.timedOut:
		s.State, s.Reason = StateAuthNeeded, "status timed out"
		return s
	case r.code != 0:
		s.State, s.Reason = StateAuthNeeded, "status failed: "+brief(r.out)
		return s
	}
	if p, ok := contains(r.out, c.pat.Disconnected); ok {
		s.State, s.Reason = StateDisconnected, p
		return s
	}
	if p, ok := contains(r.out, c.pat.Connected); ok {
		s.State, s.Reason = StateConnected, p
		return s
	}
	s.State, s.Reason = StateUnknown, "unrecognised output: "+brief(r.out)
	return s
}
