// Package control is the daemon's local control socket: the CLI (status,
// check, rotate, reconnect, diag) talks to the running daemon through a unix
// socket under the run dir, mode 0600 so only root can command it.
//
// The protocol is one JSON Request and one JSON Response per connection,
// with bounded sizes and deadlines, so a stuck or hostile client can never
// wedge the daemon.
package control

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
)

// SocketName is the control socket's file name inside the run dir.
const SocketName = "surflare-watchdog.sock"

// SocketPath is the control socket of a daemon whose run dir is runDir.
func SocketPath(runDir string) string { return filepath.Join(runDir, SocketName) }

// Commands the daemon understands. The CLI sends these; the daemon's
// Handler dispatches on them.
const (
	CmdStatus    = "status"    // no args; data: the status snapshot
	CmdCheck     = "check"     // no args; run a health check now; data: its result
	CmdRotate    = "rotate"    // args: {"node": NAME} (optional: the next candidate when absent)
	CmdReconnect = "reconnect" // no args; reconnect to the current node
	CmdDiag      = "diag"      // args: {"on": bool}; diag mode keeps tables and idles the loop
	CmdReload    = "reload"    // no args; reread the config (last good kept on error)
)

// Request is what a client sends.
type Request struct {
	Cmd  string         `json:"cmd"`
	Args map[string]any `json:"args,omitempty"`
}

// Response is what the daemon answers. When OK is false, Error says why.
type Response struct {
	OK    bool            `json:"ok"`
	Error string          `json:"error,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// Err returns the daemon's error as a Go error, nil when OK.
func (r *Response) Err() error {
	if r.OK {
		return nil
	}
	if r.Error == "" {
		return errors.New("daemon refused the command")
	}
	return errors.New(r.Error)
}

// Handler executes one command. Its result is marshalled into
// Response.Data; an error becomes Response.Error.
type Handler interface {
	Handle(ctx context.Context, req Request) (any, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req Request) (any, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, req Request) (any, error) { return f(ctx, req) }

// ErrNotRunning means no daemon answers on the socket: it is missing or
// nobody listens.
var ErrNotRunning = errors.New("daemon not running")
