package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/route"
	"surflare-watchdog/src/runfiles"
)

// A restart keeps the tunnel (watchdog/adopt.go); a stop ends it. The
// daemon gets SIGTERM in both cases, so the init system says which it is:
//
//   - procd (/etc/init.d/surflare-watchdog restart, and with it an opkg or
//     apk upgrade) and OpenRC (rc-service … restart) write HandoverFile in
//     the run directory before the stop's SIGTERM;
//   - systemd (RestartKillSignal=SIGQUIT) and runit (`sv quit`) send
//     SIGQUIT instead of SIGTERM.
//
// Either way the daemon stops without disconnecting the vendor and without
// touching a table, and the next instance adopts the tunnel if it is still
// healthy. A plain SIGTERM stops as it always did: the tunnel is
// disconnected, the kill switch stays armed.

// HandoverFile (runfiles.HandoverFile), in the run directory, asks the
// next SIGTERM to hand the tunnel over. The init scripts write it; the
// daemon removes it at start (a stale one must not turn a later stop into
// a handover) and when it acts on it.
const HandoverFile = runfiles.HandoverFile

// handoverFresh is how old HandoverFile may be: the init script writes it
// right before the stop, so an older one is a leftover of a restart whose
// daemon was not running.
const handoverFresh = time.Minute

// handoverRequested reports (and consumes) a fresh HandoverFile.
func handoverRequested(runDir string) bool {
	p := filepath.Join(runDir, HandoverFile)
	fi, err := os.Stat(p)
	if err != nil {
		return false
	}
	_ = os.Remove(p)
	return time.Since(fi.ModTime()) < handoverFresh
}

// removeStaleHandover drops a HandoverFile a restart left without a daemon
// to read it.
func (d *Daemon) removeStaleHandover(runDir string) {
	if err := os.Remove(filepath.Join(runDir, HandoverFile)); err == nil {
		d.log.Info("Removed a stale handover request", "file", HandoverFile)
	} else if !errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("Removing a stale handover request failed", "err", err)
	}
}

// handover stops the engine for a restart; false when it cannot (still
// starting), and the caller stops the usual way.
func (d *Daemon) handover(why string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := d.w.Handover(ctx); err != nil {
		d.log.Warn("Handing the tunnel over failed (still starting?); stopping the usual way", "err", err)
		return false
	}
	d.log.Info("Stopping for a restart (" + why + "): the tunnel stays for the next instance")
	return true
}

// handoverOnQuit makes SIGQUIT a handover stop (systemd's
// RestartKillSignal, runit's `sv quit`). If the engine cannot take it, the
// daemon stops the usual way (cancel).
func (d *Daemon) handoverOnQuit(ctx context.Context, cancel context.CancelFunc) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGQUIT)
	defer signal.Stop(ch)
	select {
	case <-ctx.Done():
	case <-ch:
		time.AfterFunc(stopDeadline, func() {
			d.log.Error("Stop took longer than " + stopDeadline.String() + "; exiting now (the tunnel and the kill switch stay as they are)")
			os.Exit(1)
		})
		if !d.handover("SIGQUIT") {
			cancel()
		}
	}
}

// tunnelIntact is watchdog.Deps.TunnelIntact: the kernel holds the whole
// tunnel a previous instance verified. The vendor's table and one or more
// fwmark rules with table 100's local route (duplicates are harmless to a
// running tunnel; a reconnect drains them), the vendor's proxy listening
// on the proxy port and, on a router, the LAN tproxy table live: an
// instance tombstones it whenever its tunnel is not verified, so a live
// one means the last instance had a verified tunnel when it left.
func (d *Daemon) tunnelIntact(ctx context.Context) (bool, string) {
	c := d.cfgs.Get()
	st, err := d.fw.fw.Inspect(ctx)
	if err != nil {
		return false, "reading the tables: " + err.Error()
	}
	var v4 route.TunnelState
	for _, r := range st.Routing {
		if r.Family == route.IPv4 {
			v4 = r
		}
	}
	router := d.role == string(config.RoleRouter)
	switch {
	case !st.VendorTable:
		return false, "no vendor table inet " + firewall.TableVendor
	case !v4.Complete():
		return false, fmt.Sprintf("no fwmark rule with table %d's local route", route.TunnelTable)
	case router && !slices.Contains(st.Tables, "ip "+firewall.TableTProxy):
		return false, "no LAN tproxy table"
	case router && st.TProxyTombstoned:
		return false, "the LAN tproxy is tombstoned (the last instance had no verified tunnel)"
	}
	listeners, err := d.procs.scan.ListenerPIDs(int(c.Vendor.ProxyPort))
	if err != nil {
		return false, "finding the proxy's listener: " + err.Error()
	}
	proxies, err := d.procs.scan.ByName(c.Vendor.ProxyComm)
	if err != nil {
		return false, "finding the proxy: " + err.Error()
	}
	for _, p := range proxies {
		if slices.Contains(listeners, p.PID) {
			return true, fmt.Sprintf("vendor table, %d fwmark rule(s), %s (pid %d) on port %d", len(v4.Rules), c.Vendor.ProxyComm, p.PID, c.Vendor.ProxyPort)
		}
	}
	return false, fmt.Sprintf("no %s listening on port %d", c.Vendor.ProxyComm, c.Vendor.ProxyPort)
}
