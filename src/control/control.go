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
	CmdCheck     = "check"     // args: {"wait": bool}; run a health check now
	CmdRotate    = "rotate"    // args: {"node": NAME, "wait": bool} (NAME optional: the next candidate when absent)
	CmdReconnect = "reconnect" // args: {"wait": bool}; reconnect to the current node
	CmdDiag      = "diag"      // args: {"on": bool}; diag mode keeps tables and idles the loop
	CmdReload    = "reload"    // no args; reread the config (last good kept on error)
)

// Request is what a client sends.
type Request struct {
	Cmd  string         `json:"cmd"`
	Args map[string]any `json:"args,omitempty"`
}

// ArgWait asks for an action's Outcome once it has played out, instead of
// an answer as soon as the daemon has taken it (WithWait).
const ArgWait = "wait"

// WithWait is req asking to wait for the outcome, when req is an action
// (check, rotate, reconnect); any other request is returned as it is.
func WithWait(req Request) Request {
	switch req.Cmd {
	case CmdCheck, CmdRotate, CmdReconnect:
		args := map[string]any{ArgWait: true}
		for k, v := range req.Args {
			args[k] = v
		}
		req.Args = args
	}
	return req
}

// Response is what the daemon answers. When OK is false, Error says why;
// Data may then still hold a failed action's Outcome.
type Response struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Message is an action's outcome in one line ("rotated to Chicago in
	// 2.1 s"): what the CLI prints instead of Data.
	Message string          `json:"message,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Outcome is a handler's result that says what an action came to. Serve
// puts Summary in Response.Message and, when Failed, answers ok=false
// with Summary as the error, keeping the outcome itself as Data.
type Outcome interface {
	Summary() string
	Failed() bool
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
