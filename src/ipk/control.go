package ipk

import (
	"bytes"
	"fmt"
	"strings"
)

// Field is one "Name: value" line of a control file. Order is kept because
// opkg copies the control file verbatim to /usr/lib/opkg/info/<pkg>.control
// and people diff those.
type Field struct {
	Name  string
	Value string
}

// Control is a package's control file: the fields opkg reads to decide
// whether and how to install it.
type Control struct {
	Fields []Field
}

// Get returns the value of the named field (names compare case-insensitively,
// as opkg does) and whether it is present.
func (c Control) Get(name string) (string, bool) {
	for _, f := range c.Fields {
		if strings.EqualFold(f.Name, name) {
			return f.Value, true
		}
	}
	return "", false
}

// Set replaces the named field's value, or appends the field when absent.
func (c *Control) Set(name, value string) {
	for i, f := range c.Fields {
		if strings.EqualFold(f.Name, name) {
			c.Fields[i].Value = value
			return
		}
	}
	c.Fields = append(c.Fields, Field{Name: name, Value: value})
}

// Bytes renders the control file. A multi-line value (Description) continues
// on lines that start with a space, the Debian/opkg convention.
func (c Control) Bytes() []byte {
	var b bytes.Buffer
	for _, f := range c.Fields {
		lines := strings.Split(strings.TrimRight(f.Value, "\n"), "\n")
		fmt.Fprintf(&b, "%s: %s\n", f.Name, lines[0])
		for _, l := range lines[1:] {
			if l == "" {
				l = "."
			}
			fmt.Fprintf(&b, " %s\n", l)
		}
	}
	return b.Bytes()
}

// ParseControl reads a control file. Continuation lines (leading space or
// tab) are joined to the previous field with a newline.
func ParseControl(data []byte) (Control, error) {
	var c Control
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if len(c.Fields) == 0 {
				return Control{}, fmt.Errorf("control line %d: continuation line before any field", i+1)
			}
			last := &c.Fields[len(c.Fields)-1]
			last.Value += "\n" + strings.TrimSpace(line)
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return Control{}, fmt.Errorf("control line %d: %q is not \"Name: value\"", i+1, line)
		}
		c.Fields = append(c.Fields, Field{Name: strings.TrimSpace(name), Value: strings.TrimSpace(value)})
	}
	return c, nil
}

// Dependency is one comma-separated item of a Depends field: a list of
// alternatives ("a | b"), each a package name with an optional version
// constraint that opkg checks separately.
type Dependency struct {
	Alternatives []string
}

// ParseDepends splits a Depends value into dependencies, dropping version
// constraints ("libc (>= 1.2)") since only presence is modelled here.
func ParseDepends(value string) []Dependency {
	var deps []Dependency
	for _, item := range strings.Split(value, ",") {
		var d Dependency
		for _, alt := range strings.Split(item, "|") {
			alt = strings.TrimSpace(alt)
			if i := strings.IndexAny(alt, " ("); i >= 0 {
				alt = alt[:i]
			}
			if alt != "" {
				d.Alternatives = append(d.Alternatives, alt)
			}
		}
		if len(d.Alternatives) > 0 {
			deps = append(deps, d)
		}
	}
	return deps
}
