package daemon

import (
	"context"
	"sync/atomic"

	"surflare-watchdog/src/surflare"
)

// reloadableVendor is the engine's Vendor; a reload swaps the client, so
// a username set after start (`credentials set`, LuCI's set_credentials,
// both reload) is the one the next login uses. Before, the client kept
// the username it was built with, and a fresh install's first account
// failed to log in until a restart.
type reloadableVendor struct {
	p atomic.Pointer[surflare.Client]
}

func newReloadableVendor(c *surflare.Client) *reloadableVendor {
	v := &reloadableVendor{}
	v.p.Store(c)
	return v
}

func (v *reloadableVendor) set(c *surflare.Client) { v.p.Store(c) }

func (v *reloadableVendor) Status(ctx context.Context) (surflare.Status, error) {
	return v.p.Load().Status(ctx)
}

func (v *reloadableVendor) Connect(ctx context.Context, node, mode, transit string) error {
	return v.p.Load().Connect(ctx, node, mode, transit)
}

func (v *reloadableVendor) Disconnect(ctx context.Context) error {
	return v.p.Load().Disconnect(ctx)
}

func (v *reloadableVendor) Login(ctx context.Context) error { return v.p.Load().Login(ctx) }

// Nodes is `surflare nodes` through the current client (the rotate check's
// node list).
func (v *reloadableVendor) Nodes(ctx context.Context) ([]string, error) {
	return v.p.Load().Nodes(ctx)
}
