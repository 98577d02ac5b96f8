package uci

import "strings"

// Parse parses a UCI file in strict mode, as uci does by default: the
// first syntax error stops it. name is the package name; on error it
// returns *ParseError.
func Parse(name string, data []byte) (*Config, error) {
	return parse(name, data, true, nil)
}

// ParseNonStrict parses like `uci -S`: a statement with an error is
// skipped (the rest of its line is dropped) and parsing goes on. It returns
// what was parsed and every error in file order.
func ParseNonStrict(name string, data []byte) (*Config, []*ParseError) {
	var errs []*ParseError
	c, _ := parse(name, data, false, func(e *ParseError) { errs = append(errs, e) })
	return c, errs
}

// parser turns statements into a Config, with libuci's rules for merging
// repeated sections and options.
type parser struct {
	lex     *lexer
	cfg     *Config
	section *Section
	strict  bool
	line    int // physical line where the current statement line starts

	// The rest serves `uci import`, which is uci_import with its options.

	// multi: no package name was given, so `package NAME` statements
	// start a new config each (libuci's single=false).
	multi bool
	// name is the package the next config statement opens when cfg is nil
	// (libuci's pctx->name).
	name string
	// done are the configs finished by a later `package` statement, in
	// order (libuci adds them to ctx->root).
	done []*Config
	// merge, if set, applies statements to a loaded package as recorded
	// changes (uci import -m), the way libuci does with ctx->internal off.
	merge *change
	// failed is an error that ends the import whatever the mode.
	failed error
}

// errDuplicatePackage is raised by a second `package` statement with a name
// already imported; it is libuci's UCI_ERR_DUPLICATE, not a parse error, so
// it stops even a non-strict import.
type errDuplicatePackage struct{}

// parse runs the statement loop. onError sees every parse error; in strict
// mode the first one is also returned.
func parse(name string, data []byte, strict bool, onError func(*ParseError)) (*Config, error) {
	p := &parser{lex: newLexer(data), cfg: &Config{Name: name}, strict: strict}
	if err := p.run(name, onError); err != nil {
		return nil, err
	}
	return p.cfg, nil
}

// run is uci_import's loop: line by line to the end of the input. A parse
// error stops it in strict mode, with the lexer right after the line that
// failed (a batch goes on reading from there).
func (p *parser) run(file string, onError func(*ParseError)) error {
	for !p.lex.eof {
		p.lex.pos = 0
		p.line = p.lex.line + 1
		p.lex.getln(0)
		if p.lex.at(0) == 0 {
			continue
		}
		err := p.parseLine()
		if p.failed != nil {
			return p.failed
		}
		if err == nil {
			continue
		}
		err.File = file
		if onError != nil {
			onError(err)
		}
		if p.strict {
			return err
		}
	}
	return nil
}

// parseLine parses one buffered line, which may hold several statements
// separated by ';'.
func (p *parser) parseLine() (perr *ParseError) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(errDuplicatePackage); ok {
				p.failed = ErrDuplicate
				return
			}
			f, ok := r.(*parseFailure)
			if !ok {
				panic(r)
			}
			perr = &ParseError{Line: f.line, Byte: f.byte, Msg: f.msg}
		}
	}()
	l := p.lex
	l.skipWhitespace()
	for {
		word, ok := l.strtok()
		if !ok {
			return nil
		}
		switch {
		case word[0] == '#':
			return nil
		case word == "p" || word == "package":
			p.parsePackage()
		case word == "c" || word == "config":
			p.parseConfig()
		case word == "o" || word == "option":
			p.parseOption(false)
		case word == "l" || word == "list":
			p.parseOption(true)
		default:
			l.fail("invalid command")
		}
	}
}

// parsePackage checks a `package NAME` line; inside a config file the
// name is ignored (the file name wins).
func (p *parser) parsePackage() {
	l := p.lex
	if !l.increasePos(l.strlenFromPos() + 1) {
		l.fail("package without name")
	}
	ofs := l.nextArg(true, true, true)
	p.assertEOL()
	if !p.multi {
		return
	}
	p.name = l.cstr(ofs)
	p.switchConfig()
}

// switchConfig is uci_switch_config: the current config is finished and,
// if a name is pending, a new one opened under it; a name already imported
// is a duplicate.
func (p *parser) switchConfig() {
	if p.cfg != nil {
		p.done = append(p.done, p.cfg)
		p.cfg, p.section = nil, nil
	}
	if p.name == "" {
		return
	}
	for _, c := range p.done {
		if c.Name == p.name {
			panic(errDuplicatePackage{})
		}
	}
	p.cfg = &Config{Name: p.name}
}

func (p *parser) assertEOL() {
	l := p.lex
	l.skipWhitespace()
	v := l.nextArg(false, false, false)
	if l.at(v) != 0 && p.strict {
		l.fail("too many arguments")
	}
}

func (p *parser) parseConfig() {
	l := p.lex
	if p.cfg == nil {
		if p.name == "" {
			l.fail("attempting to import a file without a package name")
		}
		p.switchConfig()
	}
	if !l.increasePos(l.strlenFromPos() + 1) {
		l.fail("config without name")
	}
	ofsType := l.nextArg(true, false, false)
	if !isType(l.cstr(ofsType)) {
		l.fail("invalid character in type field")
	}
	ofsName := l.nextArg(false, true, false)
	p.assertEOL()
	typ, name := l.cstr(ofsType), l.cstr(ofsName)

	if name == "" {
		if p.merge != nil {
			p.section = p.merge.addSection(p.cfg, typ)
		} else {
			p.section = p.cfg.addSection(typ)
		}
		p.section.Line = p.line
		return
	}
	s := p.cfg.findSection(name)
	if s != nil && p.strict && s.Type != typ {
		l.fail("section of different type overwrites prior section with same name")
	}
	if p.merge != nil {
		r := &ref{Package: p.cfg.Name, Section: name, Value: typ, HasValue: true, p: p.cfg, s: s}
		p.merge.set(r)
		p.section = r.s
		if s == nil && r.s != nil {
			r.s.Line = p.line
		}
		return
	}
	if s == nil {
		s = p.cfg.newSection(typ, name, -1)
		s.Line = p.line
	} else if s.Type != typ {
		s.changeType(typ)
	}
	p.section = s
}

func (p *parser) parseOption(list bool) {
	l := p.lex
	if p.section == nil {
		l.fail("option/list command found before the first section")
	}
	if !l.increasePos(l.strlenFromPos() + 1) {
		l.fail("option without name")
	}
	ofsName := l.nextArg(true, true, false)
	ofsValue := l.nextArg(false, false, false)
	p.assertEOL()
	name, value := l.cstr(ofsName), l.cstr(ofsValue)

	if p.merge != nil {
		r := &ref{Package: p.cfg.Name, Section: p.section.Name, Option: name, Value: value, HasValue: true,
			p: p.cfg, s: p.section, o: p.section.Option(name)}
		if list {
			p.merge.addList(r)
		} else {
			p.merge.set(r)
		}
		return
	}
	var o *Option
	if list {
		o = p.section.addListItem(name, value)
	} else {
		// An empty value in a file is not a deletion: libuci's parser
		// calls uci_set without a completed lookup, which is a no-op.
		if value == "" {
			return
		}
		o = p.section.setOption(name, value)
	}
	o.Line = p.line
}

// findSection is the plain-name lookup (first match) libuci uses.
func (c *Config) findSection(name string) *Section {
	for _, s := range c.Sections {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// newSection allocates a named section after index at (-1: at the end)
// and counts it.
func (c *Config) newSection(typ, name string, at int) *Section {
	c.created++
	s := &Section{Name: name, Type: typ}
	if at < 0 || at >= len(c.Sections) {
		c.Sections = append(c.Sections, s)
	} else {
		c.Sections = append(c.Sections[:at+1], append([]*Section{s}, c.Sections[at+1:]...)...)
	}
	return s
}

// changeType sets a new type. libuci copies a type of the same length in
// place but reallocates the section for any other length, and the copy is
// made with the section's name, so an anonymous section becomes named.
func (s *Section) changeType(typ string) {
	if len(typ) != len(s.Type) {
		s.Anonymous = false
	}
	s.Type = typ
}

// addSection appends an anonymous section with a generated name.
func (c *Config) addSection(typ string) *Section {
	s := c.newSection(typ, "", -1)
	s.Anonymous = true
	s.Name = anonName(c.created, typ)
	return s
}

// setOption sets a single value, replacing an option or list of the same
// name in its position, or appending a new option. The value must be
// non-empty.
func (s *Section) setOption(name, value string) *Option {
	if o := s.Option(name); o != nil {
		o.List = false
		o.Values = []string{value}
		return o
	}
	o := &Option{Name: name, Values: []string{value}}
	s.Options = append(s.Options, o)
	return o
}

// addListItem appends a list item; an existing single option becomes a
// list holding its old value first.
func (s *Section) addListItem(name, value string) *Option {
	o := s.Option(name)
	if o == nil {
		o = &Option{Name: name, List: true}
		s.Options = append(s.Options, o)
	} else if !o.List {
		o.List = true
	}
	o.Values = append(o.Values, value)
	return o
}

// lookupExtended resolves "@type[index]" (type may be empty for any type,
// a negative index counts from the end), as uci_lookup_ext_section does.
// A malformed reference is an error; an index out of range gives nil.
func (c *Config) lookupExtended(ref string) (*Section, error) {
	if !strings.HasPrefix(ref, "@") {
		return nil, ErrInval
	}
	rest := ref[1:]
	lb := strings.IndexByte(rest, '[')
	if lb < 0 {
		return nil, ErrInval
	}
	typ, idxstr := rest[:lb], rest[lb+1:]
	rb := strings.IndexByte(idxstr, ']')
	if rb < 0 || rb != len(idxstr)-1 {
		return nil, ErrInval
	}
	idx, ok := cStrtol(idxstr[:rb])
	if !ok {
		return nil, ErrInval
	}
	if typ != "" && !isType(typ) {
		return nil, ErrInval
	}
	match := func(s *Section) bool { return typ == "" || s.Type == typ }
	if idx < 0 {
		n := 0
		for _, s := range c.Sections {
			if match(s) {
				n++
			}
		}
		idx += n
	}
	n := 0
	for _, s := range c.Sections {
		if !match(s) {
			continue
		}
		if n == idx {
			return s, nil
		}
		n++
	}
	return nil, nil
}

// cStrtol parses like C `(int)strtol(s, &end, 10)` followed by a check
// that end is at the end of s: leading whitespace and a sign are allowed,
// an empty string is 0, overflow saturates, the result wraps to 32 bits.
func cStrtol(s string) (int, bool) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	var v int64
	over := false
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		if v > (1<<63-1-int64(s[i]-'0'))/10 {
			over = true
		} else {
			v = v*10 + int64(s[i]-'0')
		}
		i++
	}
	if i == start {
		// No digits: strtol leaves end at the start of the string.
		return 0, s == ""
	}
	if i != len(s) {
		return 0, false
	}
	if over {
		if neg {
			return int(int32(0)), true // LONG_MIN truncated to int is 0
		}
		return int(int32(-1)), true // LONG_MAX truncated to int is -1
	}
	if neg {
		v = -v
	}
	return int(int32(v)), true
}

// cSscanfInt is C sscanf(s, "%d", &v): n is 1 on success, 0 when the first
// non-space character is not a number, -1 when there is nothing but space.
func cSscanfInt(s string) (v int, n int) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	if i == len(s) {
		return 0, -1
	}
	j := i
	if s[j] == '+' || s[j] == '-' {
		j++
	}
	k := j
	for k < len(s) && s[k] >= '0' && s[k] <= '9' {
		k++
	}
	if k == j {
		return 0, 0
	}
	x, _ := cStrtol(s[i:k])
	return x, 1
}

// cStrtoulInt is C `(int)strtoul(s, NULL, 10)`: leading digits (after
// space and a sign), anything after them ignored, a minus negates with
// unsigned wrap-around, the result truncated to 32 bits.
func cStrtoulInt(s string) int {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	var v uint64
	over := false
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		d := uint64(s[i] - '0')
		if v > (^uint64(0)-d)/10 {
			over = true
		} else {
			v = v*10 + d
		}
	}
	if over {
		v = ^uint64(0)
	} else if neg {
		v = -v
	}
	return int(int32(uint32(v)))
}
