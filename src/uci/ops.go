package uci

import (
	"strconv"
	"strings"
)

// ref is a parsed uci address, "package[.section[.option]][=value]", the
// way uci_parse_ptr splits it, plus what a lookup resolved it to.
type ref struct {
	Package  string
	Section  string // "" if absent; may be "@type[n]" before lookup
	Option   string // "" if absent
	Value    string
	HasValue bool

	extended bool // Section is not a plain name: resolve as @type[n]

	p        *Config
	s        *Section
	o        *Option
	complete bool // everything named was found
}

// parseRef splits an address like uci_parse_ptr does: the value starts at
// the first '=', the rest splits on '.'. It fails with ErrParse on a bad
// package or option name, too many parts or a value with control bytes.
func parseRef(str string) (*ref, error) {
	r := &ref{}
	if i := strings.IndexByte(str, '='); i >= 0 {
		r.Value, r.HasValue = str[i+1:], true
		str = str[:i]
	}
	parts := strings.Split(str, ".")
	if len(parts) > 3 {
		return nil, ErrParse
	}
	r.Package = parts[0]
	if len(parts) > 1 {
		r.Section = parts[1]
		if !isName(r.Section) {
			r.extended = true
		}
	}
	if len(parts) > 2 {
		r.Option = parts[2]
		if !isName(r.Option) {
			return nil, ErrParse
		}
	}
	if !isPackage(r.Package) {
		return nil, ErrParse
	}
	if r.HasValue && !isText(r.Value) {
		return nil, ErrParse
	}
	return r, nil
}

// hasSection reports whether the address names a section (uci's ptr->section
// is non-NULL even when empty, e.g. "pkg.").
func (r *ref) hasSection() bool { return r.Section != "" || r.extended }

// resolve looks the section and option up in p, like uci_lookup_ptr with
// extended syntax allowed. A malformed @-reference is ErrInval; something
// not found just leaves the ref incomplete.
func (r *ref) resolve(p *Config) error {
	r.p = p
	r.s, r.o, r.complete = nil, nil, false
	if !r.hasSection() {
		r.complete = true
		return nil
	}
	var s *Section
	if r.extended {
		var err error
		s, err = p.lookupExtended(r.Section)
		if err != nil {
			return err
		}
		if s != nil {
			r.Section = s.Name
			r.extended = false
		}
	} else {
		s = p.findSection(r.Section)
	}
	if s == nil {
		return nil
	}
	r.s = s
	if r.Option != "" {
		r.o = s.Option(r.Option)
		if r.o == nil {
			return nil
		}
	}
	r.complete = true
	return nil
}

// DeltaCmd is the kind of a pending change, as stored in a delta file.
type DeltaCmd int

// The change kinds, in libuci's order (enum uci_command).
const (
	CmdAdd DeltaCmd = iota
	CmdRemove
	CmdChange
	CmdRename
	CmdReorder
	CmdListAdd
	CmdListDel
)

// deltaPrefix is the first character of a delta file line for each kind.
var deltaPrefix = [...]byte{CmdAdd: '+', CmdRemove: '-', CmdChange: 0, CmdRename: '@', CmdReorder: '^', CmdListAdd: '|', CmdListDel: '~'}

// Delta is one pending change to a package.
type Delta struct {
	Cmd      DeltaCmd
	Section  string
	Option   string // "" for a section-level change
	Value    string
	HasValue bool // a remove without a value has none
}

// change applies edits to a package the way libuci's list.c does and
// collects the deltas they record. record=false is libuci's "internal" mode,
// used when replaying delta files.
type change struct {
	record bool
	deltas []Delta
}

func (ch *change) add(d Delta) {
	if ch.record {
		ch.deltas = append(ch.deltas, d)
	}
}

// set is uci_set: create or update an option, create a named section or
// change a section's type; an empty value deletes what exists.
func (ch *change) set(r *ref) error {
	if !r.HasValue {
		return ErrInval
	}
	if !(r.s != nil || (r.Option == "" && r.hasSection())) {
		return ErrInval
	}
	if r.Option == "" && r.Value != "" && !isType(r.Value) {
		return ErrInval
	}
	if r.Value == "" {
		if !r.complete {
			return nil
		}
		// libuci's uci_delete reads the internal flag after uci_set has
		// reset it, so this delete is always recorded.
		rec := ch.record
		ch.record = true
		err := ch.remove(r)
		ch.record = rec
		return err
	}
	switch {
	case r.o == nil && r.Option != "":
		r.o = &Option{Name: r.Option, Values: []string{r.Value}}
		r.s.Options = append(r.s.Options, r.o)
	case r.s == nil:
		r.s = r.p.newSection(r.Value, r.Section, -1)
	case r.o != nil:
		if !r.o.List && len(r.o.Values) == 1 && r.o.Values[0] == r.Value {
			return nil
		}
		r.o.List = false
		r.o.Values = []string{r.Value}
	default:
		if r.s.Type == r.Value {
			return nil
		}
		r.s.changeType(r.Value)
	}
	ch.add(Delta{Cmd: CmdChange, Section: r.Section, Option: r.Option, Value: r.Value, HasValue: true})
	return nil
}

// remove is uci_delete: delete an option or section, or with a numeric
// value one item of a list by index.
func (ch *change) remove(r *ref) error {
	if !r.complete {
		return ErrNotFound
	}
	if r.s == nil {
		return ErrInval
	}
	if r.o != nil && r.o.List && r.HasValue && r.Value != "" {
		index, n := cSscanfInt(r.Value)
		if n == 0 {
			return nil // libuci returns early without an error
		}
		for i := range r.o.Values {
			if index == 0 {
				ch.add(Delta{Cmd: CmdRemove, Section: r.Section, Option: r.Option, Value: r.Value, HasValue: true})
				r.o.Values = append(r.o.Values[:i], r.o.Values[i+1:]...)
				return nil
			}
			index--
		}
		return nil
	}
	ch.add(Delta{Cmd: CmdRemove, Section: r.Section, Option: r.Option})
	if r.o != nil {
		if i := r.s.optionIndex(r.o); i >= 0 {
			r.s.Options = append(r.s.Options[:i], r.s.Options[i+1:]...)
		}
		r.o = nil
		return nil
	}
	if i := r.p.sectionIndex(r.s); i >= 0 {
		r.p.Sections = append(r.p.Sections[:i], r.p.Sections[i+1:]...)
	}
	r.s = nil
	return nil
}

// addList is uci_add_list: append an item, turning an option into a list.
func (ch *change) addList(r *ref) error {
	if r.s == nil || !r.HasValue {
		return ErrInval
	}
	if r.Option == "" {
		// libuci makes a nameless list here and records a delta line that
		// no later load accepts; the tree it would show is not reachable
		// again, so only the delta is kept.
		ch.add(Delta{Cmd: CmdListAdd, Section: r.Section, Value: r.Value, HasValue: true})
		return nil
	}
	if r.o == nil {
		r.o = &Option{Name: r.Option, List: true}
		r.s.Options = append(r.s.Options, r.o)
	}
	r.o.List = true
	r.o.Values = append(r.o.Values, r.Value)
	ch.add(Delta{Cmd: CmdListAdd, Section: r.Section, Option: r.Option, Value: r.Value, HasValue: true})
	return nil
}

// delList is uci_del_list: remove every item equal to the value. The list
// stays (possibly empty) until the file is written.
func (ch *change) delList(r *ref) error {
	if r.s == nil || !r.HasValue {
		return ErrInval
	}
	if r.o == nil || r.Option == "" || !r.o.List {
		return nil
	}
	ch.add(Delta{Cmd: CmdListDel, Section: r.Section, Option: r.Option, Value: r.Value, HasValue: true})
	kept := r.o.Values[:0]
	for _, v := range r.o.Values {
		if v != r.Value {
			kept = append(kept, v)
		}
	}
	r.o.Values = kept
	return nil
}

// rename is uci_rename: rename an option or section; a renamed anonymous
// section becomes named. The new name is not checked, as in uci.
func (ch *change) rename(r *ref) error {
	if !r.complete {
		return ErrNotFound
	}
	if r.s == nil || !r.HasValue {
		return ErrInval
	}
	ch.add(Delta{Cmd: CmdRename, Section: r.Section, Option: r.Option, Value: r.Value, HasValue: true})
	if r.o != nil {
		r.o.Name = r.Value
		return nil
	}
	r.s.Name = r.Value
	r.s.Anonymous = false
	return nil
}

// reorder is uci_reorder_section: move s to position pos (0 = first; past
// the end = last). Only a real move is recorded.
func (ch *change) reorder(p *Config, s *Section, posArg int) {
	pos := posArg
	old := p.sectionIndex(s)
	if old < 0 {
		return
	}
	rest := append(append([]*Section{}, p.Sections[:old]...), p.Sections[old+1:]...)
	at := 0
	for i := range rest {
		if pos <= 0 {
			break
		}
		pos--
		at = i + 1
	}
	p.Sections = append(append(append([]*Section{}, rest[:at]...), s), rest[at:]...)
	if at != old {
		ch.add(Delta{Cmd: CmdReorder, Section: s.Name, Value: strconv.Itoa(posArg), HasValue: true})
	}
}

// addSection is uci_add_section: a new anonymous section at the end. Its
// type is not checked, as in uci.
func (ch *change) addSection(p *Config, typ string) *Section {
	s := p.addSection(typ)
	ch.add(Delta{Cmd: CmdAdd, Section: s.Name, Value: typ, HasValue: true})
	return s
}
