package firewall

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// MasqState is what fw4's NAT looks like.
type MasqState struct {
	FW4Present bool // table inet fw4 exists
	Masquerade bool // some srcnat chain of it masquerades
}

// CheckMasquerade looks for a masquerade statement in inet fw4's srcnat
// chains. fw4 rewrites its table on every interface flap; when that goes
// wrong (or a user's include breaks it) the LAN loses NAT and, with the
// tunnel's own traffic masqueraded too, everything stalls.
func (f *Firewall) CheckMasquerade(ctx context.Context) (MasqState, error) {
	c, err := f.conn()
	if err != nil {
		return MasqState{}, err
	}
	defer c.CloseLasting()
	return checkMasquerade(c)
}

func checkMasquerade(c *nftables.Conn) (MasqState, error) {
	var st MasqState
	t, err := c.ListTableOfFamily(TableFW4, famInet)
	if err != nil || t == nil {
		return st, nil // no fw4: nothing to check
	}
	st.FW4Present = true
	chains, err := c.ListChainsOfTableFamily(famInet)
	if err != nil {
		return st, fmt.Errorf("listing fw4 chains: %w", err)
	}
	for _, ch := range chains {
		if ch.Table.Name != TableFW4 || !strings.HasPrefix(ch.Name, "srcnat") {
			continue
		}
		rules, err := c.GetRules(t, ch)
		if err != nil {
			return st, fmt.Errorf("reading fw4 chain %s: %w", ch.Name, err)
		}
		for _, r := range rules {
			for _, e := range r.Exprs {
				if _, ok := e.(*expr.Masq); ok {
					st.Masquerade = true
					return st, nil
				}
			}
		}
	}
	return st, nil
}

// fw4ReloadTimeout bounds one `fw4 reload`.
const fw4ReloadTimeout = 30 * time.Second

// RecoverMasquerade runs `fw4 reload` (never restart: a restart flushes
// conntrack-backed state and briefly drops all firewalling) when fw4 is
// loaded but has lost its masquerade, at most once per reload gap. It reports
// whether it reloaded.
func (f *Firewall) RecoverMasquerade(ctx context.Context) (bool, error) {
	st, err := f.CheckMasquerade(ctx)
	if err != nil || !st.FW4Present || st.Masquerade {
		return false, err
	}
	return f.reloadFW4(ctx)
}

// recoverMasquerade is RecoverMasquerade for Guard, which wants to know
// whether the masquerade was there (ok): a missing one whose reload was
// rate-limited must be looked at again on the next pass, events or not.
func (f *Firewall) recoverMasquerade(ctx context.Context) (ok bool, err error) {
	st, err := f.CheckMasquerade(ctx)
	if err != nil || !st.FW4Present || st.Masquerade {
		return err == nil, err
	}
	_, err = f.reloadFW4(ctx)
	return false, err
}

func (f *Firewall) reloadFW4(ctx context.Context) (bool, error) {
	f.fw4Mu.Lock()
	defer f.fw4Mu.Unlock()
	now := f.clock.Now()
	if !f.lastFW4Reload.IsZero() && now.Sub(f.lastFW4Reload) < f.fw4MinGap {
		f.log.Warn("fw4 masquerade missing; reload rate-limited", "next_in", f.fw4MinGap-now.Sub(f.lastFW4Reload))
		return false, nil
	}
	if f.runner == nil {
		return false, fmt.Errorf("fw4 masquerade missing and no command runner to reload it")
	}
	f.lastFW4Reload = now
	f.log.Warn("fw4 masquerade missing: running fw4 reload")
	rctx, cancel := context.WithTimeout(ctx, fw4ReloadTimeout)
	defer cancel()
	if out, err := f.runner(rctx, "fw4", "reload"); err != nil {
		return true, fmt.Errorf("fw4 reload: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return true, nil
}
