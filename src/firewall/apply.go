package firewall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
)

// Change is one thing Apply or Teardown changed (or would change).
type Change struct {
	Table  string // "inet killswitch"
	Object string // "", "set endpoints4", "chain output"
	Action string // "created", "recreated: …", "deleted", "+3 -1 elements", "rules replaced"
}

// String is the one-line form used in logs and CLI output.
func (c Change) String() string {
	if c.Object == "" {
		return c.Table + ": " + c.Action
	}
	return c.Table + " " + c.Object + ": " + c.Action
}

// Changes is what one Apply did; empty when the kernel already matched.
type Changes []Change

// Empty reports that nothing changed.
func (cs Changes) Empty() bool { return len(cs) == 0 }

// WriteText prints the changes one a line ("no changes" when empty), as
// `firewall apply` and `teardown` show them.
func (cs Changes) WriteText(w io.Writer) {
	if cs.Empty() {
		fmt.Fprintln(w, "no changes")
	}
	for _, c := range cs {
		fmt.Fprintln(w, c)
	}
}

// String joins the changes for a log line.
func (cs Changes) String() string {
	if cs.Empty() {
		return "no changes"
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.String()
	}
	return strings.Join(parts, "; ")
}

// Apply makes the kernel hold exactly the tables s describes. It is
// declarative and idempotent: it reads what is there, queues only the
// differences, and sends them as one atomic batch (so the kill switch is never
// absent, not even between deleting and re-creating a table). Calling it again
// with the same Spec changes nothing and returns no Changes.
func (f *Firewall) Apply(ctx context.Context, s Spec) (Changes, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("firewall spec: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.conn()
	if err != nil {
		return nil, err
	}
	defer c.CloseLasting()
	nftCh, err := f.stage(c, s)
	if err != nil {
		return nil, err
	}
	// The routing layer goes in after the kill switch's chains that
	// release what it holds, and out before them (permit.go).
	var ch Changes
	if !s.RouteLayer {
		if ch, err = f.syncLayer(ctx, s); err != nil {
			return ch, err
		}
	}
	if !nftCh.Empty() {
		err := c.Flush()
		if err != nil && f.logRulesRefused(c, s, err) { // nflog.go
			f.noLogRules = true
			f.log.Warn(logRulesOffWarning, "err", err)
			if nftCh, err = f.stage(c, s); err == nil && !nftCh.Empty() {
				err = c.Flush()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("applying firewall (%s): %w", nftCh, err)
		}
	}
	ch = append(nftCh, ch...)
	if s.RouteLayer {
		lc, err := f.syncLayer(ctx, s)
		ch = append(ch, lc...)
		if err != nil {
			return ch, err
		}
	}
	if ch.Empty() {
		return ch, nil
	}
	spec := s
	f.lastSpec = &spec
	f.log.Info("firewall applied", "changes", ch.String())
	return ch, nil
}

// stage queues the batch that turns the kernel's state into s.
func (f *Firewall) stage(c *nftables.Conn, s Spec) (Changes, error) {
	tables, err := c.ListTables()
	if err != nil {
		return nil, fmt.Errorf("listing tables: %w", err)
	}
	have := map[string]*nftables.Table{}
	for _, t := range tables {
		have[tableKey(t.Family, t.Name)] = t
	}
	var ch Changes
	wanted := map[string]bool{}
	for _, t := range f.plan(s) {
		wanted[t.key()] = true
		if kt, ok := have[t.key()]; ok {
			cs, err := stageExisting(c, kt, t)
			if err != nil {
				return nil, err
			}
			ch = append(ch, cs...)
			continue
		}
		if err := createTable(c, t); err != nil {
			return nil, err
		}
		ch = append(ch, Change{Table: t.key(), Action: "created"})
	}
	for _, o := range ownedTables {
		k := tableKey(o.fam, o.name)
		if t, ok := have[k]; ok && !wanted[k] {
			c.DelTable(t)
			ch = append(ch, Change{Table: k, Action: "deleted (not in this role/policy)"})
		}
	}
	vc, err := stageVendor(c, s, have[tableKey(famInet, TableVendor)])
	if err != nil {
		return nil, err
	}
	ch = append(ch, vc...)
	// The boot lock hands over to the kill switch in the same batch: there is
	// no moment with neither.
	if t, ok := have[tableKey(famInet, TableBootLock)]; ok {
		c.DelTable(t)
		ch = append(ch, Change{Table: tableKey(famInet, TableBootLock), Action: "deleted (kill switch is up)"})
	}
	return ch, nil
}

// createTable queues a whole table.
func createTable(c *nftables.Conn, t tableSpec) error {
	tbl := c.AddTable(&nftables.Table{Family: t.family, Name: t.name})
	for _, n := range t.counters {
		c.AddObj(&nftables.NamedObj{Table: tbl, Name: n, Type: nftables.ObjTypeCounter, Obj: &expr.Counter{}})
	}
	for _, s := range t.sets {
		set := s.nftSet(tbl)
		if err := c.AddSet(set, nil); err != nil {
			return fmt.Errorf("%s set %s: %w", t.key(), s.name, err)
		}
		if err := addSetContent(c, set, s); err != nil {
			return fmt.Errorf("%s: %w", t.key(), err)
		}
	}
	for _, cs := range t.chains {
		ch := c.AddChain(cs.nftChain(tbl))
		addRules(c, tbl, ch, cs.rules)
	}
	return nil
}

func (cs chainSpec) nftChain(t *nftables.Table) *nftables.Chain {
	h, p, pol := cs.hook, nftables.ChainPriority(cs.prio), cs.policy
	return &nftables.Chain{Name: cs.name, Table: t, Type: cs.typ, Hooknum: &h, Priority: &p, Policy: &pol}
}

func addRules(c *nftables.Conn, t *nftables.Table, ch *nftables.Chain, rules []rule) {
	for _, r := range rules {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: r.exprs, UserData: userdataComment(r.comment())})
	}
}

func userdataComment(s string) []byte { return userdata.AppendString(nil, userdata.TypeComment, s) }

// ruleComment is the comment of a rule read back from the kernel.
func ruleComment(r *nftables.Rule) string {
	s, _ := userdata.GetString(r.UserData, userdata.TypeComment)
	return s
}

// stageExisting diffs one existing table against its spec. A structural
// difference (chains, hooks, policies, set types, counters) recreates the
// table inside the batch; otherwise only set contents and changed chains are
// rewritten.
func stageExisting(c *nftables.Conn, kt *nftables.Table, t tableSpec) (Changes, error) {
	same, why, err := sameStructure(c, kt, t)
	if err != nil {
		return nil, err
	}
	if !same {
		c.DelTable(kt)
		if err := createTable(c, t); err != nil {
			return nil, err
		}
		return Changes{{Table: t.key(), Action: "recreated: " + why}}, nil
	}
	var ch Changes
	for _, s := range t.sets {
		if s.synced {
			continue
		}
		cs, err := stageSetContent(c, kt, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.key(), err)
		}
		if cs != "" {
			ch = append(ch, Change{Table: t.key(), Object: "set " + s.name, Action: cs})
		}
	}
	for _, cs := range t.chains {
		kc := cs.nftChain(kt)
		rules, err := c.GetRules(kt, kc)
		if err != nil {
			return nil, fmt.Errorf("reading %s chain %s: %w", t.key(), cs.name, err)
		}
		if sameRules(rules, cs.rules) {
			continue
		}
		c.FlushChain(kc)
		addRules(c, kt, kc, cs.rules)
		ch = append(ch, Change{Table: t.key(), Object: "chain " + cs.name, Action: "rules replaced"})
	}
	return ch, nil
}

func sameRules(have []*nftables.Rule, want []rule) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range want {
		if ruleComment(have[i]) != want[i].comment() {
			return false
		}
	}
	return true
}

// sameStructure compares chains, sets and counters by their definitions.
func sameStructure(c *nftables.Conn, kt *nftables.Table, t tableSpec) (bool, string, error) {
	chains, err := c.ListChainsOfTableFamily(t.family)
	if err != nil {
		return false, "", fmt.Errorf("listing chains of %s: %w", t.key(), err)
	}
	got := map[string]*nftables.Chain{}
	for _, ch := range chains {
		if ch.Table.Name == t.name {
			got[ch.Name] = ch
		}
	}
	if len(got) != len(t.chains) {
		return false, fmt.Sprintf("%d chains, want %d", len(got), len(t.chains)), nil
	}
	for _, cs := range t.chains {
		k, ok := got[cs.name]
		switch {
		case !ok:
			return false, "chain " + cs.name + " missing", nil
		case k.Hooknum == nil || *k.Hooknum != cs.hook, k.Priority == nil || int32(*k.Priority) != cs.prio,
			k.Type != cs.typ, k.Policy == nil || *k.Policy != cs.policy:
			return false, "chain " + cs.name + " definition changed", nil
		}
	}
	sets, err := c.GetSets(kt)
	if err != nil {
		return false, "", fmt.Errorf("listing sets of %s: %w", t.key(), err)
	}
	gotSets := map[string]*nftables.Set{}
	for _, s := range sets {
		gotSets[s.Name] = s
	}
	if len(gotSets) != len(t.sets) {
		return false, fmt.Sprintf("%d sets, want %d", len(gotSets), len(t.sets)), nil
	}
	for _, s := range t.sets {
		k, ok := gotSets[s.name]
		switch {
		case !ok:
			return false, "set " + s.name + " missing", nil
		case k.KeyType.Name != s.kind.datatype().Name, k.Interval != s.interval,
			k.HasTimeout != (s.timeout > 0), s.timeout > 0 && k.Timeout != s.timeout:
			return false, "set " + s.name + " definition changed", nil
		}
	}
	objs, err := c.GetNamedObjects(kt)
	if err != nil && !errors.Is(err, errNoObjects) {
		return false, "", fmt.Errorf("listing counters of %s: %w", t.key(), err)
	}
	gotObjs := map[string]bool{}
	for _, o := range objs {
		if n, ok := o.(*nftables.NamedObj); ok && n.Type == nftables.ObjTypeCounter {
			gotObjs[n.Name] = true
		}
	}
	if len(gotObjs) != len(t.counters) {
		return false, fmt.Sprintf("%d counters, want %d", len(gotObjs), len(t.counters)), nil
	}
	for _, n := range t.counters {
		if !gotObjs[n] {
			return false, "counter " + n + " missing", nil
		}
	}
	return true, "", nil
}

var errNoObjects = errors.New("no objects")

// stageSetContent queues the element changes of one set and describes them
// ("" when none). Interval sets are rewritten whole (flush + add in the same
// batch): range boundaries cannot be patched element by element.
func stageSetContent(c *nftables.Conn, kt *nftables.Table, s setSpec) (string, error) {
	set := s.nftSet(kt)
	elems, err := dumpSetKeys(c, set)
	if err != nil {
		return "", err
	}
	kc := readContent(s.kind, s.interval, elems)
	if sameContent(s, kc) {
		return "", nil
	}
	if s.interval {
		c.FlushSet(set)
		if err := addSetContent(c, set, s); err != nil {
			return "", err
		}
		return fmt.Sprintf("rewritten (%d ranges, was %d)", len(s.ranges), len(kc.ranges)), nil
	}
	want := s.elements()
	have := kernelSpec(s, kc).elements()
	add, del := diffElements(want, have)
	if len(del) > 0 {
		if err := delElements(c, set, del); err != nil {
			return "", err
		}
	}
	if len(add) > 0 {
		if err := addElements(c, set, add); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("+%d -%d elements", len(add), len(del)), nil
}

func kernelSpec(s setSpec, kc kernelContent) setSpec {
	s.ranges, s.addrs, s.macs = kc.ranges, kc.addrs, kc.macs
	return s
}

func diffElements(want, have []nftables.SetElement) (add, del []nftables.SetElement) {
	key := func(e nftables.SetElement) string { return string(e.Key) }
	h := map[string]bool{}
	for _, e := range have {
		h[key(e)] = true
	}
	w := map[string]bool{}
	for _, e := range want {
		w[key(e)] = true
		if !h[key(e)] {
			add = append(add, e)
		}
	}
	for _, e := range have {
		if !w[key(e)] {
			del = append(del, e)
		}
	}
	return add, del
}
