package daemon

import (
	"context"
	"errors"
	"time"

	"surflare-watchdog/src/surflare"
	"surflare-watchdog/src/ubus"
)

// The vendor's node list (`surflare nodes`) checks the node a user rotates
// to, in the engine's Rotate: the one place the control socket, ubus and
// the web API all go through. A typo is refused there with "did you mean"
// before anything touches the tunnel (ubus: INVALID_ARGUMENT; API: 400;
// CLI: exit 1).

// nodeListTimeout bounds a background refresh of the list.
const nodeListTimeout = 15 * time.Second

// startNodeList makes the cache over the vendor CLI and fills it in the
// background: a start must not wait for the CLI.
// ctx bounds every refresh: the daemon's helpers' context.
func (d *Daemon) startNodeList(ctx context.Context) {
	d.nodeList = surflare.NewNodeCache(d.vendor.Nodes, nil)
	d.nodeListCtx = ctx
	d.refreshNodeList()
}

// refreshNodeList rereads the list in the background (start, reload).
func (d *Daemon) refreshNodeList() {
	if d.nodeList == nil {
		return
	}
	go func() {
		rctx, cancel := context.WithTimeout(d.nodeListCtx, nodeListTimeout)
		defer cancel()
		if err := d.nodeList.Refresh(rctx); err != nil {
			d.log.Warn("Reading the vendor's node list failed; rotate accepts the candidates and auto until it works", "err", err)
			return
		}
		d.log.Info("Vendor node list read", "nodes", len(d.nodeList.Nodes()))
		d.warnUnlistedNodes(d.nodeList.Nodes())
	}()
}

// warnUnlistedNodes checks the configured node and candidates against the
// vendor's live list (E1: auto and any listed tag, Tokyo included, are
// valid; the list is known only now, not when the config loads). A name
// the vendor does not list would fail its connect; the warning names it
// and what was probably meant, so the owner can fix the config before a
// rotation needs it.
func (d *Daemon) warnUnlistedNodes(listed []string) {
	c := d.cfgs.Get()
	names := append([]string{c.Main.Node}, c.Main.Candidates...)
	for _, e := range surflare.UnlistedNodes(names, listed) {
		d.log.Warn("Config names a node the vendor does not list ('surflare nodes'); a connect to it will fail: "+e.Error()+
			" Fix surflare.main.node or the candidate list.", "node", e.Input, "code", "NODE_UNLISTED")
	}
}

// unknownNode reports whether err refuses a node name: a caller's mistake.
func unknownNode(err error) bool {
	var unknown *surflare.UnknownNodeError
	return errors.As(err, &unknown)
}

// rotateStatus is the ubus status for a rotate's error.
func rotateStatus(err error) ubus.Status {
	if unknownNode(err) {
		return ubus.StatusInvalidArgument
	}
	return commandStatus(err)
}
