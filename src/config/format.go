package config

import (
	"bytes"
	"encoding/json"

	"surflare-watchdog/src/uci"
)

// Format writes c as a complete UCI file with every option set: the
// effective configuration, in a form Parse reads back to the same value.
// Two configs are equal exactly when their Format output is.
func Format(c *Config) []byte { return c.UCI().Bytes() }

// UCI returns c as a UCI tree (package "surflare"), every option spelled
// out, e.g. for writing a config file for a test or the lab.
func (c *Config) UCI() *uci.Config {
	u := &uci.Config{Name: "surflare"}
	section := func(typ, name string, opts []option) {
		s := &uci.Section{Type: typ, Name: name, Anonymous: name == ""}
		for _, o := range opts {
			if vals := o.v.text(); vals != nil {
				s.Options = append(s.Options, &uci.Option{Name: o.name, Values: vals, List: o.list})
			}
		}
		u.Sections = append(u.Sections, s)
	}
	for _, s := range c.singletons() {
		section(s.typ, conventionalName(s.typ), s.options)
	}
	for i := range c.Probes {
		section(typeProbe, c.Probes[i].Name, c.Probes[i].options())
	}
	for i := range c.Bypass {
		section(typeBypass, c.Bypass[i].Section, c.Bypass[i].options())
	}
	return u
}

// Equal reports whether two configs have the same effective settings.
func Equal(a, b *Config) bool { return bytes.Equal(Format(a), Format(b)) }

// MarshalJSON shows the config keyed by UCI section and option names (the
// names users and LuCI know), sections in file order; repeated sections are
// arrays whose elements carry their section name as ".name", like ubus's
// uci object does. Durations are Go duration strings ("30s").
//
// It has a value receiver so a Config embedded by value marshals the same.
func (cfg Config) MarshalJSON() ([]byte, error) {
	c := &cfg
	var b bytes.Buffer
	b.WriteByte('{')
	for i, s := range c.singletons() {
		if i > 0 {
			b.WriteByte(',')
		}
		writeKey(&b, conventionalName(s.typ))
		if err := writeOptions(&b, "", s.options); err != nil {
			return nil, err
		}
	}
	repeated := func(typ string, n int, name func(int) string, opts func(int) []option) error {
		b.WriteByte(',')
		writeKey(&b, typ)
		b.WriteByte('[')
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeOptions(&b, name(i), opts(i)); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	}
	if err := repeated(typeProbe, len(c.Probes),
		func(i int) string { return c.Probes[i].Name },
		func(i int) []option { return c.Probes[i].options() }); err != nil {
		return nil, err
	}
	if err := repeated(typeBypass, len(c.Bypass),
		func(i int) string { return c.Bypass[i].Section },
		func(i int) []option { return c.Bypass[i].options() }); err != nil {
		return nil, err
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func writeKey(b *bytes.Buffer, k string) {
	kb, _ := json.Marshal(k)
	b.Write(kb)
	b.WriteByte(':')
}

// writeOptions writes one section as a JSON object; name, when not empty,
// comes first as ".name".
func writeOptions(b *bytes.Buffer, name string, opts []option) error {
	b.WriteByte('{')
	first := true
	field := func(k string, v any) error {
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeKey(b, k)
		vb, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.Write(vb)
		return nil
	}
	if name != "" {
		if err := field(".name", name); err != nil {
			return err
		}
	}
	for _, o := range opts {
		if err := field(o.name, o.v.json()); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}
