package uci

import (
	"strings"
)

// Line renders the delta as a line of a delta (save) file, package name
// included, newline terminated.
func (d Delta) Line(pkg string) string {
	var sb strings.Builder
	if p := deltaPrefix[d.Cmd]; p != 0 {
		sb.WriteByte(p)
	}
	sb.WriteString(pkg + "." + d.Section)
	if d.Option != "" {
		sb.WriteString("." + d.Option)
	}
	if d.Cmd == CmdRemove && !d.HasValue {
		sb.WriteString("\n")
	} else {
		sb.WriteString("=" + quote(d.Value) + "\n")
	}
	return sb.String()
}

// ChangeLine renders the delta as `uci changes` shows it: '-' before a
// removal, '+=' and '-=' for list edits, '=' for everything else.
func (d Delta) ChangeLine(pkg string) string {
	prefix, op := "", "="
	switch d.Cmd {
	case CmdRemove:
		prefix = "-"
	case CmdListAdd:
		op = "+="
	case CmdListDel:
		op = "-="
	}
	s := prefix + pkg + "." + d.Section
	if d.Option != "" {
		s += "." + d.Option
	}
	if d.Cmd != CmdRemove {
		s += op + quote(d.Value)
	}
	return s + "\n"
}

// deltaTuple is one accepted line of a delta file.
type deltaTuple struct {
	pkg string
	d   Delta
}

// parseDeltaLines reads a delta file. Each line is one uci-quoted word: a
// command prefix and "package.section[.option][=value]". Lines that do not
// parse are skipped; ok is false if any was (revert refuses to rewrite such
// a file).
func parseDeltaLines(data []byte) (out []deltaTuple, ok bool) {
	ok = true
	lex := newLexer(data)
	for !lex.eof {
		lex.pos = 0
		lex.getln(0)
		if lex.at(0) == 0 {
			continue
		}
		t, good := parseDeltaTuple(lex)
		if !good {
			ok = false
			continue
		}
		out = append(out, t)
	}
	return out, ok
}

func parseDeltaTuple(lex *lexer) (t deltaTuple, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, isParse := r.(*parseFailure); !isParse {
				panic(r)
			}
			ok = false
		}
	}()
	v := lex.nextArg(false, false, false)
	if lex.cur() != 0 {
		return t, false
	}
	arg := lex.cstr(v)
	cmd := CmdChange
	if arg != "" {
		for c, p := range deltaPrefix {
			if p != 0 && p == arg[0] {
				cmd = DeltaCmd(c)
				break
			}
		}
	}
	if cmd != CmdChange {
		arg = arg[1:]
	}
	r, err := parseRef(arg)
	if err != nil || r.Section == "" || r.extended {
		return t, false
	}
	if cmd != CmdRemove && !r.HasValue {
		return t, false
	}
	switch cmd {
	case CmdReorder:
		if r.Option != "" {
			return t, false
		}
	case CmdRename:
		if !isName(r.Value) {
			return t, false
		}
	case CmdListAdd, CmdListDel:
		if r.Option == "" {
			return t, false
		}
	}
	return deltaTuple{pkg: r.Package, d: Delta{Cmd: cmd, Section: r.Section, Option: r.Option, Value: r.Value, HasValue: r.HasValue}}, true
}

// applyDelta replays one change on p without recording it, as libuci does
// when it loads a package's delta files. It reports whether the change
// applied (uci counts those to decide whether a commit has work to do);
// deltas the replay itself records are returned too.
func applyDelta(p *Config, d Delta) (applied bool, recorded []Delta) {
	r := &ref{Package: p.Name, Section: d.Section, Option: d.Option, Value: d.Value, HasValue: d.HasValue}
	if err := r.resolve(p); err != nil {
		return false, nil
	}
	ch := &change{}
	var err error
	switch d.Cmd {
	case CmdReorder:
		if !r.complete || r.s == nil {
			return false, nil
		}
		ch.reorder(p, r.s, cStrtoulInt(d.Value))
	case CmdRename:
		err = ch.rename(r)
	case CmdRemove:
		err = ch.remove(r)
	case CmdListAdd:
		err = ch.addList(r)
	case CmdListDel:
		err = ch.delList(r)
	case CmdAdd:
		err = ch.set(r)
		if err == nil && r.Option == "" && r.s != nil {
			r.s.Anonymous = true
		}
	case CmdChange:
		err = ch.set(r)
	}
	return err == nil, ch.deltas
}
