package api

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
)

// Hub sizes, after the gorilla chat example: one goroutine owns the client
// set; Publish only ever does a non-blocking send to it, so a stuck browser
// or a slow hub never stalls the daemon.
const (
	// hubBacklog is how many frames may wait for the hub goroutine before
	// Publish starts dropping (counted in surflare_watchdog_api_dropped_events_total).
	hubBacklog = 256
	// clientBuffer is how many frames a client may lag behind before the hub
	// drops it; the page reconnects and gets a fresh snapshot.
	clientBuffer = 64
	// maxClients bounds the open websockets.
	maxClients = 32
	// defaultHistory is how many events /api/v1/events and a new
	// websocket's first frame carry.
	defaultHistory = 200
)

// hub fans frames out to websocket clients and keeps the recent history.
type hub struct {
	register   chan *client
	unregister chan *client
	broadcast  chan []byte
	running    atomic.Bool
	done       chan struct{} // closed when run returns

	clients map[*client]struct{} // owned by run

	histMu  sync.Mutex
	history [][]byte // ring of event frames, oldest first once full
	histMax int
	histPos int

	nClients       atomic.Int64
	droppedEvents  atomic.Int64
	droppedClients atomic.Int64
	eventsByKind   sync.Map // kind -> *atomic.Int64
}

// client is one websocket connection: its send channel is buffered and
// closed only by the hub.
type client struct {
	send chan []byte
}

func newHub(history int) *hub {
	if history <= 0 {
		history = defaultHistory
	}
	return &hub{
		register:   make(chan *client),
		unregister: make(chan *client),
		broadcast:  make(chan []byte, hubBacklog),
		done:       make(chan struct{}),
		clients:    make(map[*client]struct{}),
		histMax:    history,
	}
}

// run owns the client set until ctx ends; then it closes every client's
// send channel (their writers send a close frame and hang up).
func (h *hub) run(ctx context.Context) {
	h.running.Store(true)
	defer func() {
		for c := range h.clients {
			h.removeLocked(c)
		}
		h.running.Store(false)
		close(h.done)
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-h.register:
			if len(h.clients) >= maxClients {
				close(c.send)
				continue
			}
			h.clients[c] = struct{}{}
			h.nClients.Add(1)
		case c := <-h.unregister:
			h.removeLocked(c)
		case frame := <-h.broadcast:
			for c := range h.clients {
				select {
				case c.send <- frame:
				default:
					// Too slow: drop it rather than wait or lose frames silently.
					h.removeLocked(c)
					h.droppedClients.Add(1)
				}
			}
		}
	}
}

// removeLocked forgets c and closes its channel; only run calls it.
func (h *hub) removeLocked(c *client) {
	if _, ok := h.clients[c]; ok {
		delete(h.clients, c)
		close(c.send)
		h.nClients.Add(-1)
	}
}

// join registers c, or reports false when the hub is not running or ctx
// ends first.
func (h *hub) join(ctx context.Context, c *client) bool {
	if !h.running.Load() {
		return false
	}
	select {
	case h.register <- c:
		return true
	case <-h.done:
		return false
	case <-ctx.Done():
		return false
	}
}

// leave unregisters c; a no-op once the hub has stopped.
func (h *hub) leave(c *client) {
	select {
	case h.unregister <- c:
	case <-h.done:
	}
}

// publish queues frame for every client without blocking. Event frames
// (not snapshots) are also kept in the history.
func (h *hub) publish(kind string, frame []byte, keep bool) {
	if keep {
		h.countKind(kind)
		h.histMu.Lock()
		if len(h.history) < h.histMax {
			h.history = append(h.history, frame)
		} else {
			h.history[h.histPos] = frame
			h.histPos = (h.histPos + 1) % h.histMax
		}
		h.histMu.Unlock()
	}
	if !h.running.Load() {
		return
	}
	select {
	case h.broadcast <- frame:
	default:
		h.droppedEvents.Add(1)
	}
}

// recent returns up to n of the newest event frames, oldest first.
func (h *hub) recent(n int) []json.RawMessage {
	h.histMu.Lock()
	defer h.histMu.Unlock()
	out := make([]json.RawMessage, 0, len(h.history))
	for i := range h.history {
		out = append(out, h.history[(h.histPos+i)%len(h.history)])
	}
	if n > 0 && n < len(out) {
		out = out[len(out)-n:]
	}
	return out
}

func (h *hub) countKind(kind string) {
	v, _ := h.eventsByKind.LoadOrStore(kind, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// kindCounts returns the events published per kind since start.
func (h *hub) kindCounts() map[string]int64 {
	m := map[string]int64{}
	h.eventsByKind.Range(func(k, v any) bool {
		m[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return m
}
