package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Bounds that keep one client from holding the daemon.
const (
	maxRequestBytes = 64 << 10 // a request is a command and a few args
	maxConns        = 8        // concurrent clients; more get "busy"
	readTimeout     = 5 * time.Second
	writeTimeout    = 5 * time.Second
	// handlerTimeout bounds one command: a rotation waited for may connect
	// twice before it answers (the new node, then back to the old one:
	// each phase 1 ≤ 20 s + phase 2 ≤ 60 s by default, and the engine
	// bounds its own wait a little above that).
	handlerTimeout = 4 * time.Minute
)

// logger is looked up on use, so it follows slog.SetDefault done by main.
func logger() *slog.Logger { return slog.Default().With("subsystem", "control") }

// Serve listens on the unix socket path until ctx is done, answering one
// request per connection through h. A stale socket file (nobody listening)
// is replaced; a live one is an error, so two daemons never fight over it.
// The socket appears with mode 0600 already set, and is removed on return.
func Serve(ctx context.Context, path string, h Handler) error {
	ln, err := listen(path)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer func() {
		ln.Close()
		wg.Wait()
		os.Remove(path)
	}()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	slots := make(chan struct{}, maxConns)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("control socket %s closed: %w", path, err)
			}
			logger().Warn("accept failed", "err", err)
			select { // e.g. EMFILE: don't spin
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			wg.Go(func() { refuse(conn, "busy: too many control clients, try again") })
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			serveConn(ctx, conn, h)
		})
	}
}

// listen binds under a temporary name, sets 0600 and renames into place,
// so the socket is never reachable with looser permissions.
func listen(path string) (*net.UnixListener, error) {
	if err := removeStale(path); err != nil {
		return nil, err
	}
	tmp := path + ".tmp" + strconv.Itoa(os.Getpid())
	os.Remove(tmp)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("creating control socket: %w", err)
	}
	ln.SetUnlinkOnClose(false) // it lives at path after the rename; Serve removes it
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("creating control socket: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("creating control socket: %w", err)
	}
	return ln, nil
}

// removeStale deletes a socket at path that nobody listens on. It refuses
// to touch anything that is not a socket, or a socket with a live daemon.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking control socket: %w", err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("control socket %s: a file that is not a socket is in the way", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("control socket %s: another daemon is already listening", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing stale control socket: %w", err)
	}
	logger().Info("removed stale control socket", "path", path)
	return nil
}

func serveConn(ctx context.Context, conn net.Conn, h Handler) {
	defer conn.Close()
	req, err := readRequest(conn)
	if err != nil {
		reply(conn, Response{Error: err.Error()})
		return
	}
	hctx, cancel := context.WithTimeout(ctx, handlerTimeout)
	defer cancel()
	reply(conn, call(hctx, h, req))
}

// call runs the handler, turning its panics and errors into a response: a
// bad command must never take the daemon down.
func call(ctx context.Context, h Handler, req Request) (resp Response) {
	defer func() {
		if p := recover(); p != nil {
			logger().Error("control command panicked", "cmd", req.Cmd, "panic", p)
			resp = Response{Error: fmt.Sprintf("internal error in %q", req.Cmd)}
		}
	}()
	data, err := h.Handle(ctx, req)
	if err != nil {
		return Response{Error: err.Error()}
	}
	resp = Response{OK: true}
	if o, ok := data.(Outcome); ok {
		resp.Message = o.Summary()
		if o.Failed() {
			resp.OK, resp.Error = false, o.Summary()
		}
	}
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return Response{Error: fmt.Sprintf("encoding the answer to %q: %v", req.Cmd, err)}
		}
		resp.Data = b
	}
	return resp
}

// readRequest reads one request, bounded in size and time.
func readRequest(conn net.Conn) (Request, error) {
	conn.SetReadDeadline(time.Now().Add(readTimeout))
	var req Request
	if err := json.NewDecoder(io.LimitReader(conn, maxRequestBytes)).Decode(&req); err != nil {
		return req, fmt.Errorf("bad request: %w", err)
	}
	if req.Cmd == "" {
		return req, errors.New("bad request: no cmd")
	}
	return req, nil
}

// refuse answers without running the command. It still reads the request
// first: closing on a client that is writing would break its pipe instead
// of telling it why.
func refuse(conn net.Conn, msg string) {
	defer conn.Close()
	readRequest(conn)
	reply(conn, Response{Error: msg})
}

func reply(conn net.Conn, resp Response) {
	conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	b, _ := json.Marshal(resp) // a Response always marshals
	if _, err := conn.Write(append(b, '\n')); err != nil {
		logger().Debug("control reply not delivered", "err", err)
	}
}
