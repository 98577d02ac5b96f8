package firewall

import (
	"context"
	"fmt"
	"time"

	"github.com/google/nftables"
)

// DomesticSource is the set SmartDNS writes the addresses of domestic
// domains into (its nftset target, e.g. `nftset /cn-domains/#4:inet#killswitch#domestic_domain_ips`).
// By default that is the kill switch's own set, so the router's direct
// traffic to those addresses passes at once; Sync copies it into the LAN
// tproxy table's set, where it makes LAN traffic skip the proxy.
var DomesticSource = SetRef{Family: "inet", Table: TableKillSwitch, Set: SetDomestic}

// SetRef names a set in the kernel.
type SetRef struct{ Family, Table, Set string }

// String is "family table set", as nft names it.
func (r SetRef) String() string { return r.Family + " " + r.Table + " " + r.Set }

func (r SetRef) family() (nftables.TableFamily, error) {
	switch r.Family {
	case "inet":
		return famInet, nil
	case "ip":
		return famIP, nil
	case "ip6":
		return famIP6, nil
	}
	return 0, fmt.Errorf("set %s: unknown family %q", r, r.Family)
}

// domesticTargets are our copies of the domestic set.
var domesticTargets = []SetRef{
	{Family: "inet", Table: TableKillSwitch, Set: SetDomestic},
	{Family: "ip", Table: TableTProxy, Set: SetDomestic},
}

// refreshSlack: an element is re-added only when the source's expiry is this
// much later than the copy's, so a sync every few seconds stays quiet.
const refreshSlack = time.Minute

// SyncDomestic copies the elements of src into every other domestic set of
// ours that exists, with the source's remaining timeout (refreshed when
// SmartDNS has refreshed it). Elements that expire go by themselves. One
// batch; it returns how many elements it wrote.
func (f *Firewall) SyncDomestic(ctx context.Context, src SetRef) (int, error) {
	fam, err := src.family()
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.conn()
	if err != nil {
		return 0, err
	}
	defer c.CloseLasting()
	srcSet, err := c.GetSetByName(&nftables.Table{Family: fam, Name: src.Table}, src.Set)
	if err != nil {
		return 0, nil // not there (yet): nothing to copy
	}
	have, err := c.GetSetElements(srcSet)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", src, err)
	}
	n := 0
	for _, dst := range domesticTargets {
		if dst == src {
			continue
		}
		dfam, _ := dst.family()
		set, err := c.GetSetByName(&nftables.Table{Family: dfam, Name: dst.Table}, dst.Set)
		if err != nil {
			continue // table not installed in this role
		}
		cur, err := c.GetSetElements(set)
		if err != nil {
			return 0, fmt.Errorf("reading %s: %w", dst, err)
		}
		expires := map[string]time.Duration{}
		for _, e := range cur {
			expires[string(e.Key)] = e.Expires
		}
		var add, del []nftables.SetElement
		for _, e := range have {
			left := e.Expires
			if left <= 0 {
				left = DomesticTimeout
			}
			got, ok := expires[string(e.Key)]
			if ok && got+refreshSlack >= left {
				continue
			}
			if ok {
				del = append(del, nftables.SetElement{Key: e.Key})
			}
			add = append(add, nftables.SetElement{Key: e.Key, Timeout: left.Round(time.Second)})
		}
		if err := delElements(c, set, del); err != nil {
			return 0, err
		}
		if err := addElements(c, set, add); err != nil {
			return 0, err
		}
		n += len(add)
	}
	if n == 0 {
		return 0, nil
	}
	if err := c.Flush(); err != nil {
		return 0, fmt.Errorf("syncing domestic addresses from %s: %w", src, err)
	}
	return n, nil
}
