package surflare

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// NodeCache keeps the vendor's node list (`surflare nodes`) so that a name
// a person types is checked without running the CLI every time. The daemon
// refreshes it at start and on reload; Resolve refreshes it once more when
// a name is unknown to it (the vendor may have added a node), at most once
// per RefreshEvery, so a run of typos does not run the CLI a run of times.
type NodeCache struct {
	list func(ctx context.Context) ([]string, error)
	now  func() time.Time

	refreshing sync.Mutex // one `surflare nodes` at a time
	mu         sync.Mutex // guards the fields below
	nodes      []string
	tried      time.Time // last refresh attempt
}

// RefreshEvery bounds how often an unknown name runs `surflare nodes`.
const RefreshEvery = 10 * time.Second

// NewNodeCache returns an empty cache over list (Client.Nodes); now may be
// nil (time.Now).
func NewNodeCache(list func(ctx context.Context) ([]string, error), now func() time.Time) *NodeCache {
	if now == nil {
		now = time.Now
	}
	return &NodeCache{list: list, now: now}
}

// Refresh asks the vendor for its list. On error the list it had stays.
func (c *NodeCache) Refresh(ctx context.Context) error {
	c.refreshing.Lock()
	defer c.refreshing.Unlock()
	c.mu.Lock()
	c.tried = c.now()
	c.mu.Unlock()
	nodes, err := c.list(ctx)
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return errors.New("surflare nodes listed no node")
	}
	c.mu.Lock()
	c.nodes = nodes
	c.mu.Unlock()
	return nil
}

// Nodes is the list as last read (nil before the first good refresh).
func (c *NodeCache) Nodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.nodes)
}

// Resolve is ResolveNode against the cached list and candidates. A name
// unknown to both refreshes the list (see RefreshEvery) and is tried
// again; a refresh that fails leaves the answer to the list it had.
func (c *NodeCache) Resolve(ctx context.Context, input string, candidates []string) (string, error) {
	n, err := ResolveNode(input, c.Nodes(), candidates)
	var unknown *UnknownNodeError
	if !errors.As(err, &unknown) {
		return n, err
	}
	c.mu.Lock()
	stale := c.tried.IsZero() || c.now().Sub(c.tried) >= RefreshEvery
	c.mu.Unlock()
	if !stale || c.Refresh(ctx) != nil {
		return n, err
	}
	return ResolveNode(input, c.Nodes(), candidates)
}
