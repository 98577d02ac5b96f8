package ubus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrNotConnected is returned by Service methods while ubusd is unreachable.
var ErrNotConnected = errors.New("not connected to ubusd")

// Default reconnect backoff: procd restarts ubusd within a second, so start
// short; cap it so a long outage costs one attempt every few seconds.
const (
	DefaultMinBackoff = 250 * time.Millisecond
	DefaultMaxBackoff = 8 * time.Second
)

// Service keeps one connection to ubusd with Objects registered on it for as
// long as Run runs: when ubusd goes away (restart, crash, upgrade) it
// reconnects with exponential backoff and registers the objects again.
// Fields must be set before Run; methods are safe for concurrent use.
type Service struct {
	Socket  string    // ubusd socket; DefaultSocket when empty
	Objects []*Object // registered on every connection
	// OnConnect, if set, runs after each (re)connection once the objects
	// are registered and Conn returns the new connection, e.g. to Listen
	// again or send the current state; an error drops the connection and
	// retries.
	OnConnect func(ctx context.Context, c *Conn) error
	// MinBackoff and MaxBackoff bound the wait between attempts.
	MinBackoff, MaxBackoff time.Duration
	// Sleep waits d or until ctx ends (then returns its error). Nil means a
	// real timer; tests inject an instant one.
	Sleep func(ctx context.Context, d time.Duration) error
	// Log defaults to slog.Default() with subsystem=ubus.
	Log *slog.Logger
	// SocketSafety: once the backoff has reached MaxBackoff, a real wait
	// (Sleep nil) ends when ubusd creates its socket, or after this long
	// at the latest (DefaultSocketSafety when 0; socketwait.go).
	SocketSafety time.Duration

	mu   sync.Mutex
	conn *Conn
}

// Run connects, registers and serves until ctx is cancelled. It only
// returns then, with nil.
func (s *Service) Run(ctx context.Context) error {
	log := s.Log
	if log == nil {
		log = slog.Default().With("subsystem", "ubus")
	}
	minB, maxB := s.MinBackoff, s.MaxBackoff
	if minB <= 0 {
		minB = DefaultMinBackoff
	}
	if maxB < minB {
		maxB = max(DefaultMaxBackoff, minB)
	}
	sleep := s.Sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	backoff, failures := minB, 0
	for ctx.Err() == nil {
		if err := s.session(ctx, log, failures); err != nil {
			failures++
			// the first failure is news; the rest of an outage is noise
			lvl := slog.LevelDebug
			if failures == 1 {
				lvl = slog.LevelWarn
			}
			log.Log(ctx, lvl, "ubus unavailable, retrying", "err", err, "in", backoff)
		} else {
			failures, backoff = 0, minB
		}
		wait := sleep
		if s.Sleep == nil && failures > 0 && backoff >= maxB {
			// A long outage, or no ubusd at all: wait for its socket.
			wait = func(ctx context.Context, d time.Duration) error {
				return waitSocket(ctx, s.socket(), d, cmp.Or(s.SocketSafety, DefaultSocketSafety))
			}
		}
		if wait(ctx, backoff) != nil {
			break
		}
		if failures > 0 {
			backoff = min(backoff*2, maxB)
		}
	}
	return nil
}

// session is one connection's life: connect, register, OnConnect, then
// serve until ubusd goes away or ctx ends. It returns an error only if the
// connection never came up.
func (s *Service) session(ctx context.Context, log *slog.Logger, failures int) error {
	c, err := s.connect(ctx)
	if err != nil {
		return err
	}
	s.setConn(c)
	defer s.setConn(nil)
	if s.OnConnect != nil {
		if err := s.OnConnect(ctx, c); err != nil {
			c.Close()
			return err
		}
	}
	log.Info("ubus connected", "client", fmt.Sprintf("%08x", c.ClientID()), "failed_attempts", failures)
	select {
	case <-c.Done():
		if ctx.Err() == nil {
			log.Warn("ubus connection lost, reconnecting", "err", c.Err())
		}
	case <-ctx.Done():
		c.Close()
	}
	return nil
}

// connect dials ubusd and registers the objects; on error the connection
// is closed so ubusd forgets what was half registered.
func (s *Service) connect(ctx context.Context) (*Conn, error) {
	c, err := Dial(ctx, s.Socket)
	if err != nil {
		return nil, err
	}
	for _, obj := range s.Objects {
		if err = c.AddObject(ctx, obj); err != nil {
			break
		}
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// socket is Socket or DefaultSocket.
func (s *Service) socket() string { return cmp.Or(s.Socket, DefaultSocket) }

func (s *Service) setConn(c *Conn) {
	s.mu.Lock()
	s.conn = c
	s.mu.Unlock()
}

// Conn returns the live connection, or nil while there is none.
func (s *Service) Conn() *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn
}

func (s *Service) live() (*Conn, error) {
	if c := s.Conn(); c != nil && c.Err() == nil {
		return c, nil
	}
	return nil, ErrNotConnected
}

// SendEvent sends an event on the live connection. While ubusd is away the
// event is not queued: listeners that come back ask for the state anyway.
func (s *Service) SendEvent(ctx context.Context, name string, data Fields) error {
	c, err := s.live()
	if err != nil {
		return fmt.Errorf("sending ubus event %s: %w", name, err)
	}
	return c.SendEvent(ctx, name, data)
}

// Notify notifies obj's subscribers on the live connection. The
// notification also goes to obj's EventLog, if it has one, even while
// ubusd is away.
func (s *Service) Notify(obj *Object, typ string, data Fields) error {
	if obj.events != nil {
		obj.events.Add(typ, time.Now(), data)
	}
	c, err := s.live()
	if err != nil {
		return fmt.Errorf("ubus notify %s: %w", typ, err)
	}
	return c.Notify(obj, typ, data)
}

// Call calls a method of another ubus object on the live connection.
func (s *Service) Call(ctx context.Context, path, method string, args map[string]any) (map[string]any, error) {
	c, err := s.live()
	if err != nil {
		return nil, fmt.Errorf("ubus call %s %s: %w", path, method, err)
	}
	return c.Call(ctx, path, method, args)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
