package surflare

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestNodeCacheRefreshesOnAnUnknownNameAtMostEvery10s(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	listed := []string{"Dallas", "Chicago"}
	var calls int
	var fail error
	c := NewNodeCache(func(context.Context) ([]string, error) {
		calls++
		return slices.Clone(listed), fail
	}, func() time.Time { return now })
	ctx := context.Background()
	if err := c.Refresh(ctx); err != nil || !slices.Equal(c.Nodes(), listed) {
		t.Fatalf("refresh: %v, nodes %q", err, c.Nodes())
	}
	// Known: no CLI call.
	if n, err := c.Resolve(ctx, "chicago", nil); n != "Chicago" || err != nil || calls != 1 {
		t.Errorf("chicago: %q %v after %d calls", n, err, calls)
	}
	// The vendor added Tokyo: a name unknown to the cache asks again, once
	// the last refresh is RefreshEvery old.
	listed = append(listed, "Tokyo")
	if _, err := c.Resolve(ctx, "tokyo", nil); err == nil || calls != 1 {
		t.Errorf("tokyo right after a refresh: %v after %d calls, want refused without asking", err, calls)
	}
	now = now.Add(RefreshEvery)
	if n, err := c.Resolve(ctx, "tokyo", nil); n != "Tokyo" || err != nil || calls != 2 {
		t.Errorf("tokyo after %s: %q %v after %d calls", RefreshEvery, n, err, calls)
	}
	// A run of typos runs the CLI at most once per RefreshEvery.
	now = now.Add(RefreshEvery)
	for range 5 {
		var ue *UnknownNodeError
		if _, err := c.Resolve(ctx, "Narnia", []string{"Miami"}); !errors.As(err, &ue) || !slices.Contains(ue.Known, "Miami") {
			t.Errorf("Narnia: %v", err)
		}
	}
	if calls != 3 {
		t.Errorf("%d CLI calls for five typos, want 1", calls-2)
	}
	// A failing CLI keeps the list it had.
	fail, listed = errors.New("surflare nodes: exit 1"), nil
	now = now.Add(RefreshEvery)
	if n, err := c.Resolve(ctx, "dallas", nil); n != "Dallas" || err != nil {
		t.Errorf("dallas: %q %v", n, err)
	}
	if err := c.Refresh(ctx); err == nil || len(c.Nodes()) != 3 {
		t.Errorf("failed refresh: %v, nodes %q", err, c.Nodes())
	}
}
