package firewall

import (
	"fmt"

	"github.com/google/nftables"
)

// stageVendor keeps our extension of the vendor's table in line with the
// mode: in global mode the sets exist with the right content and every
// prerouting/output base chain starts with our accepts; in rule mode none of
// it is there. The vendor table itself is never created or deleted here.
func stageVendor(c *nftables.Conn, s Spec, vt *nftables.Table) (Changes, error) {
	if vt == nil {
		return nil, nil
	}
	key := tableKey(famInet, TableVendor)
	global := s.Mode == ModeGlobal
	var ch Changes
	// Sets first (rules reference them), deletions after the rules that
	// referenced them are gone.
	sets, err := c.GetSets(vt)
	if err != nil {
		return nil, fmt.Errorf("listing sets of %s: %w", key, err)
	}
	present := map[string]bool{}
	for _, st := range sets {
		present[st.Name] = true
	}
	var dropSets []setSpec
	for _, vs := range vendorSets(s) {
		switch {
		case global && !present[vs.name]:
			set := vs.nftSet(vt)
			if err := c.AddSet(set, nil); err != nil {
				return nil, fmt.Errorf("%s set %s: %w", key, vs.name, err)
			}
			if err := addSetContent(c, set, vs); err != nil {
				return nil, err
			}
			ch = append(ch, Change{Table: key, Object: "set " + vs.name, Action: "created"})
		case global:
			d, err := stageSetContent(c, vt, vs)
			if err != nil {
				return nil, err
			}
			if d != "" {
				ch = append(ch, Change{Table: key, Object: "set " + vs.name, Action: d})
			}
		case present[vs.name]:
			dropSets = append(dropSets, vs)
		}
	}
	chains, err := c.ListChainsOfTableFamily(famInet)
	if err != nil {
		return nil, fmt.Errorf("listing chains of %s: %w", key, err)
	}
	want := vendorRules()
	for _, kc := range chains {
		if kc.Table.Name != TableVendor {
			continue
		}
		rules, err := c.GetRules(vt, kc)
		if err != nil {
			return nil, fmt.Errorf("reading %s chain %s: %w", key, kc.Name, err)
		}
		ours := ourVendorRules(rules)
		wantHere := global && vendorHooked(kc)
		if wantHere && len(ours) == len(want) && leadingOurs(rules, len(want)) && sameRules(rules[:len(want)], want) {
			continue
		}
		for _, r := range ours {
			if err := c.DelRule(r); err != nil {
				return nil, fmt.Errorf("removing our rule from %s chain %s: %w", key, kc.Name, err)
			}
		}
		if wantHere {
			// Insert in reverse so they end up first, in order.
			for i := len(want) - 1; i >= 0; i-- {
				c.InsertRule(&nftables.Rule{Table: vt, Chain: kc, Exprs: want[i].exprs,
					UserData: userdataComment(want[i].comment())})
			}
			ch = append(ch, Change{Table: key, Object: "chain " + kc.Name, Action: "cn_direct accepts installed"})
		} else if len(ours) > 0 {
			ch = append(ch, Change{Table: key, Object: "chain " + kc.Name, Action: "our accepts removed"})
		}
	}
	for _, vs := range dropSets {
		c.DelSet(vs.nftSet(vt))
		ch = append(ch, Change{Table: key, Object: "set " + vs.name, Action: "deleted"})
	}
	return ch, nil
}

// ourVendorRules are the rules in a vendor chain that carry our comments.
func ourVendorRules(rules []*nftables.Rule) []*nftables.Rule {
	var out []*nftables.Rule
	for _, r := range rules {
		if isOurVendorComment(ruleComment(r)) {
			out = append(out, r)
		}
	}
	return out
}

func isOurVendorComment(c string) bool {
	for _, r := range vendorRules() {
		if len(c) > len(r.id) && c[:len(r.id)+1] == r.id+" " {
			return true
		}
	}
	return false
}

func leadingOurs(rules []*nftables.Rule, n int) bool {
	if len(rules) < n {
		return false
	}
	for _, r := range rules[:n] {
		if !isOurVendorComment(ruleComment(r)) {
			return false
		}
	}
	return true
}
