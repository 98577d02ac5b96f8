package watchdog

// FirewallMode is the whole of what the engine wants from the firewall at
// one time. The firewall (the daemon's adapter over package firewall)
// turns a mode into tables; Set may be called again with the same mode and
// re-applies it. The kill switch itself is the same in every mode that has
// it: the relay and account-API endpoints are in it all along, so nothing
// needs opening for a reconnect.
type FirewallMode int

const (
	// FirewallKillSwitch: the kill switch and the moat, LAN TCP reset (the
	// LAN tproxy is tombstoned), domestic and bypassed traffic direct.
	// Startup, every connect until the tunnel is verified, the storm
	// cooldown, and every state after a failed connect.
	FirewallKillSwitch FirewallMode = iota
	// FirewallLANProxy: everything, LAN TCP into the verified proxy, the
	// tunnel routing (fwmark rule, table 100) ensured. Also at startup
	// while a tunnel the previous instance verified is looked at for
	// adoption (adopt.go): its LAN tables are what it left in the kernel.
	FirewallLANProxy
	// FirewallFailOpen: no tables at all and nothing re-applying them; the
	// user chose availability over privacy after repeated login failures.
	FirewallFailOpen
	// FirewallStopped: the engine stopped; the kill switch stays, the rest
	// goes, nothing re-applies it.
	FirewallStopped
	// FirewallStoppedOpen: stopped with --open-on-exit: no tables at all.
	FirewallStoppedOpen
)

var firewallModeNames = [...]string{"kill-switch", "lan-proxy", "fail-open", "stopped", "stopped-open"}

func (m FirewallMode) String() string {
	if int(m) < len(firewallModeNames) {
		return firewallModeNames[m]
	}
	return "unknown"
}

// firewallMode is the one place the firewall's mode is decided, from the
// same facts as nextState (state.go). Stopping wins over everything (the
// guard must not put back what the teardown removes), fail-open over the
// tunnel, and the LAN goes into the proxy only once a connect has verified
// the tunnel end to end.
func firewallMode(f facts) FirewallMode {
	switch {
	case f.stopping || f.stopped:
		// A fresh install without an account had no kill switch to keep
		// (preflight.go): stopping must not lock its LAN.
		if f.stopOpen || f.pre.openSetup {
			return FirewallStoppedOpen
		}
		return FirewallStopped
	case f.auth.failOpen || f.pre.openSetup:
		// A fresh install without an account (preflight.go) is open too.
		return FirewallFailOpen
	case f.lanProxied || f.adopting:
		return FirewallLANProxy
	default:
		return FirewallKillSwitch
	}
}
