package ubus

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// DefaultSocket is where ubusd listens on OpenWrt.
const DefaultSocket = "/var/run/ubus/ubus.sock"

// Timeouts. DefaultTimeout is the ubus CLI's default -t (30 s): a request
// whose context has no deadline gives up after it, as does a method handler.
const (
	DefaultTimeout = 30 * time.Second
	helloTimeout   = 5 * time.Second  // ubusd sends HELLO at once; longer means it is wedged
	writeTimeout   = 10 * time.Second // a ubusd that stops reading must not hang the daemon
	maxDataReplies = 1024             // DATA messages kept per request; more is a misbehaving peer
)

// ErrClosed is returned by requests on a connection that has ended.
var ErrClosed = errors.New("ubus connection closed")

// Conn is one client connection to ubusd. It is safe for concurrent use:
// one goroutine reads and dispatches, requests wait for their reply by seq,
// and method handlers of served objects run on their own goroutines.
type Conn struct {
	nc       net.Conn
	log      *slog.Logger
	clientID uint32

	ctx    context.Context // ends when the connection does; handlers run under it
	cancel context.CancelCauseFunc

	wmu sync.Mutex // one message on the wire at a time

	mu       sync.Mutex
	seq      uint16
	pending  map[uint16]*pending
	objects  map[uint32]*registration // by ubusd object id
	byObject map[*Object]*registration
}

// pending is an outstanding request: its DATA replies and its final STATUS.
type pending struct {
	peer   uint32
	onData func(*Message) // runs on the read goroutine, before later messages
	data   []*Message
	done   chan Status
}

// Dial connects to ubusd's unix socket (DefaultSocket when path is empty)
// and waits for its HELLO.
func Dial(ctx context.Context, path string) (*Conn, error) {
	if path == "" {
		path = DefaultSocket
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("connecting to ubusd at %s: %w", path, err)
	}
	c, err := NewConn(ctx, nc)
	if err != nil {
		return nil, fmt.Errorf("ubusd at %s: %w", path, err)
	}
	return c, nil
}

// NewConn runs the ubus protocol over an established stream (Dial uses it;
// tests hand it one end of a pipe). It reads ubusd's HELLO first; on error
// nc is closed.
func NewConn(ctx context.Context, nc net.Conn) (*Conn, error) {
	deadline := time.Now().Add(helloTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	rd := bufio.NewReader(nc)
	_ = nc.SetReadDeadline(deadline)
	b, err := readFrame(rd)
	if err == nil {
		var m *Message
		if m, err = Decode(b); err == nil {
			if m.Type != MsgHello {
				err = fmt.Errorf("first message is %s, want HELLO", m.Type)
			} else {
				c := newConn(nc, m.Peer)
				_ = nc.SetReadDeadline(time.Time{})
				go c.readLoop(rd)
				return c, nil
			}
		}
	}
	nc.Close()
	return nil, fmt.Errorf("waiting for HELLO: %w", err)
}

func newConn(nc net.Conn, clientID uint32) *Conn {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Conn{
		nc:       nc,
		log:      slog.Default().With("subsystem", "ubus"),
		clientID: clientID,
		ctx:      ctx,
		cancel:   cancel,
		pending:  map[uint16]*pending{},
		objects:  map[uint32]*registration{},
		byObject: map[*Object]*registration{},
	}
}

// ClientID is the id ubusd gave this connection in its HELLO.
func (c *Conn) ClientID() uint32 { return c.clientID }

// Done is closed when the connection has ended (Close, ubusd gone, or a
// framing error); Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.ctx.Done() }

// Err is nil while the connection is up, else why it ended.
func (c *Conn) Err() error {
	if c.ctx.Err() == nil {
		return nil
	}
	return context.Cause(c.ctx)
}

// Close ends the connection. ubusd then drops every object, listener and
// subscription this connection made.
func (c *Conn) Close() error {
	c.shutdown(ErrClosed)
	return nil
}

func (c *Conn) shutdown(cause error) {
	c.cancel(cause)
	c.nc.Close()
}

func (c *Conn) readLoop(rd *bufio.Reader) {
	for {
		b, err := readFrame(rd)
		if err != nil {
			c.shutdown(fmt.Errorf("%w: reading from ubusd: %w", ErrClosed, err))
			return
		}
		m, err := Decode(b)
		if err != nil {
			if m = salvageInvoke(b); m == nil {
				c.log.Warn("dropping malformed ubus message", "err", err)
				continue
			}
		}
		c.dispatch(m)
	}
}

func (c *Conn) dispatch(m *Message) {
	switch m.Type {
	case MsgStatus, MsgData:
		c.handleReply(m)
	case MsgInvoke, MsgNotify, MsgUnsubscribe:
		c.handleObjectMsg(m)
	default:
		c.log.Debug("ignoring ubus message", "type", m.Type, "seq", m.Seq)
	}
}

// handleReply matches a DATA or STATUS to its request by seq and peer, as
// libubus does; anything else is a late reply to an abandoned request.
func (c *Conn) handleReply(m *Message) {
	c.mu.Lock()
	p := c.pending[m.Seq]
	if p == nil || p.peer != m.Peer {
		c.mu.Unlock()
		c.log.Debug("dropping unmatched ubus reply", "type", m.Type, "seq", m.Seq, "peer", m.Peer)
		return
	}
	if m.Type == MsgData {
		if len(p.data) < maxDataReplies {
			p.data = append(p.data, m)
		}
		onData := p.onData
		c.mu.Unlock()
		if onData != nil {
			onData(m)
		}
		return
	}
	delete(c.pending, m.Seq)
	c.mu.Unlock()
	st := StatusInvalidArgument // libubus's verdict on a STATUS without a code
	if v, ok := m.U32(AttrStatus); ok {
		st = Status(v)
	}
	p.done <- st
}

// nextSeqLocked numbers requests from 1 like libubus, skipping numbers
// still waiting for a reply after the 16-bit counter wraps.
func (c *Conn) nextSeqLocked() uint16 {
	for {
		c.seq++
		if _, busy := c.pending[c.seq]; !busy {
			return c.seq
		}
	}
}

// send writes one message; a failed write ends the connection, since a
// partial message leaves the stream unusable.
func (c *Conn) send(m *Message) error {
	b, err := m.Encode()
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.Err(); err != nil {
		return err
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := c.nc.Write(b); err != nil {
		err = fmt.Errorf("%w: writing to ubusd: %w", ErrClosed, err)
		c.shutdown(err)
		return err
	}
	return nil
}

// request sends m with the next seq and waits for its STATUS. A non-zero
// status is returned as the error, together with any DATA that came first.
func (c *Conn) request(ctx context.Context, m *Message, onData func(*Message)) ([]*Message, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	p := &pending{peer: m.Peer, onData: onData, done: make(chan Status, 1)}
	c.mu.Lock()
	m.Seq = c.nextSeqLocked()
	c.pending[m.Seq] = p
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.pending[m.Seq] == p {
			delete(c.pending, m.Seq)
		}
		c.mu.Unlock()
	}()
	if err := c.send(m); err != nil {
		return nil, err
	}
	select {
	case st := <-p.done:
		c.mu.Lock()
		data := p.data
		c.mu.Unlock()
		if st != StatusOK {
			return data, st
		}
		return data, nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("ubus %s: %w (%w)", m.Type, StatusTimeout, ctx.Err())
		}
		return nil, fmt.Errorf("ubus %s: %w", m.Type, ctx.Err())
	case <-c.ctx.Done():
		return nil, c.Err()
	}
}
