package api

import (
	"context"
	"errors"
	"time"
)

// Backend is what the API needs from the daemon. It is defined here, on the
// consumer side, so the API can be tested and previewed with a fake and the
// daemon's wiring adapts its watchdog handle to it in a few lines.
//
// Status and Nodes return values that marshal to JSON objects/arrays; the
// API passes them through (redacted) and derives /metrics from the field
// names of the watchdog's status snapshot (state, node, transit, mode, exit,
// counters, last_check, signals, candidates, uptime_s).
type Backend interface {
	// Status is the daemon's status snapshot.
	Status(ctx context.Context) (any, error)
	// Nodes is the per-node health table.
	Nodes(ctx context.Context) (any, error)
	// Check starts a health check now.
	Check(ctx context.Context) error
	// Rotate connects to node, or to the next candidate when node is "".
	Rotate(ctx context.Context, node string) error
	// Reconnect reconnects on the current node.
	Reconnect(ctx context.Context) error
	// SetDiag turns diagnostics mode on or off.
	SetDiag(ctx context.Context, on bool) error
}

// Subscriber is optionally implemented by a Backend that has a live event
// stream: Run follows it, so the daemon need not call Publish itself. The
// channel is closed when the subscription ends; cancel ends it early.
type Subscriber interface {
	Subscribe() (events <-chan Event, cancel func())
}

// Event is one item of the live stream and of the recent history served by
// /api/v1/events. Data is marshalled to JSON as it is (after redaction).
type Event struct {
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	Data any       `json:"data,omitempty"`
}

// Event kinds the daemon publishes. The live view knows how to show each;
// an unknown kind is listed in the timeline with its raw data.
const (
	// KindTransition: a state change; Data {from, to, reason}.
	KindTransition = "transition"
	// KindHealth: a health check result; Data is the check (outcome,
	// reason, duration_ms, exit_ip, exit_country, tunnel[] probes …).
	KindHealth = "health"
	// KindSignal: a detector changed its view; Data {name, state, detail}.
	KindSignal = "signal"
	// KindRotation: a node rotation; Data {from, to, reason}.
	KindRotation = "rotation"
	// KindLog: a user-facing log line; Data {level, message}.
	KindLog = "log"
)

// Kinds the server itself sends on the websocket (never stored in history).
const (
	// KindSnapshot carries {status, nodes} after changes and periodically;
	// the first frame of a connection also carries {events} (the history).
	KindSnapshot = "snapshot"
)

// ErrBadRequest marks a Backend error caused by the caller's input (an
// unknown node, a command refused in the current mode): the API answers
// 400 with the error's text instead of 500. Wrap it with %w.
var ErrBadRequest = errors.New("bad request")
