package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Bulk is a legitimate bulk workload: many HTTP/1.1 keep-alive connections
// from one LAN client, all open at once (a download manager, a game
// patcher, a CDN-heavy page). Through the tunnel each one is two of the
// proxy's in-flight sockets — the tproxy-accepted half (to the web host)
// and the proxy's own 0xff half (to the relay) — which is what the loop
// guard's gate counts; unlike a loop, none of them pairs up with another.
type Bulk struct {
	mu    sync.Mutex
	conns []*bulkConn
}

type bulkConn struct {
	c    net.Conn
	r    *bufio.Reader
	dst  netip.AddrPort
	path string
}

// BulkTarget is one web host of a Bulk workload: N connections to Dst
// (HTTP), each asking for Path.
type BulkTarget struct {
	Dst  netip.AddrPort
	Path string
	N    int
}

// bulkDialTimeout bounds one connection's set-up and each request.
const bulkDialTimeout = 5 * time.Second

// OpenBulk opens the targets' keep-alive connections from LAN client i
// and makes one request on each, so every connection is established end
// to end. On error the ones already open are closed.
func (l *Lab) OpenBulk(ctx context.Context, client int, targets []BulkTarget) (*Bulk, error) {
	if client < 0 || client >= len(l.clients) {
		return nil, fmt.Errorf("lab %s has no client %d", l.Prefix, client)
	}
	ns, err := l.NS(l.clients[client].Role)
	if err != nil {
		return nil, err
	}
	b := &Bulk{}
	for _, tg := range targets {
		dst := tg.Dst
		for range tg.N {
			dctx, cancel := context.WithTimeout(ctx, bulkDialTimeout)
			c, err := dialIn(dctx, ns, "tcp4", dst.String())
			cancel()
			if err != nil {
				b.Close()
				return nil, fmt.Errorf("bulk: connection %d to %s: %w", len(b.conns)+1, dst, err)
			}
			bc := &bulkConn{c: c, r: bufio.NewReader(c), dst: dst, path: tg.Path}
			b.conns = append(b.conns, bc)
			if err := bc.get(); err != nil {
				b.Close()
				return nil, fmt.Errorf("bulk: first request on connection %d to %s: %w", len(b.conns), dst, err)
			}
		}
	}
	return b, nil
}

// get makes one GET on the kept-alive connection and reads the whole
// answer; anything but 200 is an error.
func (bc *bulkConn) get() error {
	_ = bc.c.SetDeadline(time.Now().Add(bulkDialTimeout))
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: lab-bulk\r\n\r\n", bc.path, bc.dst.Addr())
	if _, err := io.WriteString(bc.c, req); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bc.r, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if resp.Close {
		return errors.New("the server closed the kept-alive connection")
	}
	return nil
}

// Len is how many connections are held.
func (b *Bulk) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

// Finish makes one more request on every held connection (the workload
// completing after it was held open) and closes them all. It returns how
// many failed and the first failure.
func (b *Bulk) Finish() (failed int, first error) {
	b.mu.Lock()
	conns := b.conns
	b.conns = nil
	b.mu.Unlock()
	for _, bc := range conns {
		if err := bc.get(); err != nil {
			failed++
			if first == nil {
				first = fmt.Errorf("%s (local %s): %w", bc.dst, bc.c.LocalAddr(), err)
			}
		}
		bc.c.Close()
	}
	return failed, first
}

// Close drops every connection without a last request.
func (b *Bulk) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, bc := range b.conns {
		bc.c.Close()
	}
	b.conns = nil
}
