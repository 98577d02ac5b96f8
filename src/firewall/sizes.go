package firewall

import (
	"context"
	"sort"
)

// TableSize is one table with how much is in it, for the daemon's status.
type TableSize struct {
	Name  string         `json:"name"` // "inet killswitch"
	Rules int            `json:"rules"`
	Sets  map[string]int `json:"sets"` // elements per set (interval sets count boundaries)
}

// sizedTables are the tables status reports: every table Apply owns, the
// on-demand trace table and the vendor's, whose size shows whether the
// vendor's rules are there at all.
func sizedTables() map[string]bool {
	out := map[string]bool{
		tableKey(famInet, TableTrace):  true,
		tableKey(famInet, TableVendor): true,
	}
	for _, o := range ownedTables {
		out[tableKey(o.fam, o.name)] = true
	}
	return out
}

// TableSizes lists the sizes of the tables that are there, sorted by
// name; nil when nftables cannot be read.
func (f *Firewall) TableSizes(ctx context.Context) []TableSize {
	c, err := f.conn()
	if err != nil {
		return nil
	}
	defer c.CloseLasting()
	tables, err := c.ListTables()
	if err != nil {
		return nil
	}
	want := sizedTables()
	var out []TableSize
	for _, t := range tables {
		key := tableKey(t.Family, t.Name)
		if !want[key] {
			continue
		}
		ts := TableSize{Name: key, Sets: map[string]int{}}
		if chains, err := c.ListChainsOfTableFamily(t.Family); err == nil {
			for _, ch := range chains {
				if ch.Table.Name != t.Name {
					continue
				}
				if rs, err := c.GetRules(t, ch); err == nil {
					ts.Rules += len(rs)
				}
			}
		}
		if sets, err := c.GetSets(t); err == nil {
			for _, s := range sets {
				if n, err := countSetElements(c, s); err == nil {
					ts.Sets[s.Name] = n
				}
			}
		}
		out = append(out, ts)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
