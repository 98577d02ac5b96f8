// Package uci reads and writes OpenWrt UCI configuration files the way the
// real uci tool (github.com/openwrt/uci) does, byte for byte: the same
// tokenizer quirks, the same anonymous section names, the same error
// positions, the same pending-change (delta) files. The watchdog's config
// lives in /etc/config/surflare, and laptops without OpenWrt's uci need to
// read and edit it exactly as a router would.
package uci

import "fmt"

// Config is one parsed UCI package (file).
type Config struct {
	Name     string     // package name (the file name)
	Sections []*Section // in file order

	// created counts every section ever allocated in this package, as
	// libuci's n_section does; it is the first part of a generated
	// anonymous section name and never goes down on delete.
	created int
}

// Section is one `config TYPE ['NAME']` block.
type Section struct {
	Name      string // given name, or generated cfgXXXXXX for anonymous
	Type      string
	Anonymous bool
	Line      int // 1-based line of the `config` statement
	Options   []*Option
}

// Option is an `option` (one value) or a `list` (any number of values).
type Option struct {
	Name   string
	Values []string // one element for an option, N for a list
	List   bool
	Line   int // 1-based line where it was (last) set
}

// Value returns the option's value: the single value of an option, or the
// list items joined by a space, as `uci get` prints an unquoted list.
func (o *Option) Value() string {
	if o == nil {
		return ""
	}
	if !o.List {
		if len(o.Values) == 0 {
			return ""
		}
		return o.Values[0]
	}
	s := ""
	for i, v := range o.Values {
		if i > 0 {
			s += " "
		}
		s += v
	}
	return s
}

// Section returns the first section with the given name, or nil. Like uci,
// a name that is not a plain name (e.g. "@rule[0]") is resolved as an
// extended reference.
func (c *Config) Section(name string) *Section {
	if c == nil {
		return nil
	}
	for _, s := range c.Sections {
		if s.Name == name {
			return s
		}
	}
	if len(name) > 0 && name[0] == '@' {
		if s, err := c.lookupExtended(name); err == nil {
			return s
		}
	}
	return nil
}

// SectionsOfType returns the sections of one type, in file order.
func (c *Config) SectionsOfType(typ string) []*Section {
	if c == nil {
		return nil
	}
	var out []*Section
	for _, s := range c.Sections {
		if s.Type == typ {
			out = append(out, s)
		}
	}
	return out
}

// Option returns the option with the given name, or nil if absent.
func (s *Section) Option(name string) *Option {
	if s == nil {
		return nil
	}
	for _, o := range s.Options {
		if o.Name == name {
			return o
		}
	}
	return nil
}

// Get returns the value of an option (see Option.Value) and whether it exists.
func (s *Section) Get(name string) (string, bool) {
	o := s.Option(name)
	if o == nil {
		return "", false
	}
	return o.Value(), true
}

func (c *Config) sectionIndex(s *Section) int {
	for i, x := range c.Sections {
		if x == s {
			return i
		}
	}
	return -1
}

func (s *Section) optionIndex(o *Option) int {
	for i, x := range s.Options {
		if x == o {
			return i
		}
	}
	return -1
}

// ParseError is a syntax error in a UCI file. Line and Byte are what the
// real uci prints: Line counts the newline-terminated lines read so far and
// Byte is the parser's offset into its line buffer (not always the bad
// character's column).
type ParseError struct {
	File string
	Line int
	Byte int
	Msg  string
}

// Error formats the error as uci does, without the program-name prefix.
func (e *ParseError) Error() string {
	return fmt.Sprintf("Parse error (%s) at line %d, byte %d", e.Msg, e.Line, e.Byte)
}

// isName reports whether s is a valid section or option name:
// non-empty, only [A-Za-z0-9_].
func isName(s string) bool { return validStr(s, true, false) }

// isType reports whether s is a valid section type: non-empty, printable
// ASCII 33..126.
func isType(s string) bool { return validStr(s, false, false) }

// isPackage reports whether s is a valid package (file) name: like a type,
// and '-' is explicitly allowed.
func isPackage(s string) bool { return validStr(s, false, true) }

func validStr(s string, name, pkg bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isAlnum(c) || c == '_' {
			continue
		}
		if c == '-' && pkg {
			continue
		}
		if name || c < 33 || c > 126 {
			return false
		}
	}
	return true
}

// isText reports whether a value may be stored: no control characters
// other than TAB, LF and CR.
func isText(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 32 && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// isSpace is C isspace in the C locale.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// anonName generates the name of an anonymous section: "cfg", the number
// of sections allocated so far (counting this one), and the low 16 bits of
// a DJB hash of the type (libuci would also hash options, but there are
// none yet when the name is made).
func anonName(count int, typ string) string {
	h := uint32(5381)
	for i := 0; i < len(typ); i++ {
		// C hashes a (signed) char; types are ASCII so this is the same.
		h = h*33 + uint32(int32(int8(typ[i])))
	}
	h &= 0x7fffffff
	return fmt.Sprintf("cfg%02x%04x", count, h%(1<<16))
}
