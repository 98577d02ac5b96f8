package lab

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"time"
)

// Start runs a long-lived program in a role's namespace, its output going
// to <labdir>/log/<name>.log. The lab stops it (process group SIGTERM, then
// SIGKILL) on Close; Stop stops it earlier. It returns the process id.
func (l *Lab) Start(name, role string, argv ...string) (int, error) {
	return l.startLogged(name, l.Command(role, argv...), startProc)
}

// startLogged starts cmd with start, its output going to
// <labdir>/log/<name>.log, and keeps it in the lab's process list.
func (l *Lab) startLogged(name string, cmd *exec.Cmd, start func(string, *exec.Cmd) (*proc, error)) (int, error) {
	logf, err := os.OpenFile(l.Path(dirLog, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("%s log: %w", name, err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	p, err := start(name, cmd)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	l.procs = append(l.procs, p)
	l.mu.Unlock()
	return cmd.Process.Pid, nil
}

// Stop stops a program started with Start (by name); it reports whether
// one was running.
func (l *Lab) Stop(name string) bool {
	l.mu.Lock()
	var found []*proc
	rest := l.procs[:0]
	for _, p := range l.procs {
		if p.name == name {
			found = append(found, p)
		} else {
			rest = append(rest, p)
		}
	}
	l.procs = rest
	l.mu.Unlock()
	for _, p := range found {
		p.stop(2 * time.Second)
	}
	return len(found) > 0
}

// LogPath is the log file of a program started with Start.
func (l *Lab) LogPath(name string) string { return l.Path(dirLog, name+".log") }

// ForwardTCP exposes a service inside a role's namespace on a listener in
// the caller's namespace (the host): each accepted connection is dialled
// from inside the namespace and the bytes are copied both ways. This is a
// user-space relay, not routing: the lab stays unconnected to the host's
// interfaces. It serves until ctx is cancelled.
func (l *Lab) ForwardTCP(ctx context.Context, listen, role, target string) (net.Listener, error) {
	ns, err := l.NS(role)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("relay listen %s: %w", listen, err)
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				up, err := dialIn(dctx, ns, "tcp", target)
				cancel()
				if err != nil {
					l.log.Warn("relay dial failed", "target", target, "err", err)
					return
				}
				defer up.Close()
				pipe(ctx, c, up)
			}()
		}
	}()
	return ln, nil
}

// pipe copies both ways until either side closes or ctx ends.
func pipe(ctx context.Context, a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}
	go cp(a, b)
	go cp(b, a)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		a.Close()
		b.Close()
		<-done
	}
}
