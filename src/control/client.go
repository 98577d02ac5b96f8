package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"syscall"
	"time"
)

// Client-side bounds.
const (
	maxResponseBytes = 4 << 20 // a status snapshot with per-probe detail fits easily
	// callTimeout applies when ctx has no deadline; a bit longer than the
	// server's handlerTimeout so its answer, even an error, gets through.
	callTimeout = handlerTimeout + 10*time.Second
)

// Call sends one request to the daemon listening on path and returns its
// response (whose OK may be false: see Response.Err). The error wraps
// ErrNotRunning when the socket is missing or nobody listens on it.
func Call(ctx context.Context, path string, req Request) (*Response, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, callTimeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w (no control socket at %s)", ErrNotRunning, path)
		}
		return nil, fmt.Errorf("connecting to the daemon: %w", err)
	}
	defer conn.Close()
	// Interrupt the I/O only once ctx is done, so the error then is always
	// the context's (a socket deadline could fire a moment earlier).
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()

	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encoding request: %w", err)
	}
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("sending %q to the daemon: %w", req.Cmd, ctxErr(ctx, err))
	}
	var resp Response
	if err := json.NewDecoder(io.LimitReader(conn, maxResponseBytes)).Decode(&resp); err != nil {
		return nil, fmt.Errorf("reading the daemon's answer to %q: %w", req.Cmd, ctxErr(ctx, err))
	}
	return &resp, nil
}

// ctxErr prefers the context's reason (cancelled, deadline) over the
// I/O error it caused.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
