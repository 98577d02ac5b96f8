package uci

import (
	"bufio"
	"io"
	"strings"
)

// ExportOptions select the variants of `uci export` and of a committed file.
type ExportOptions struct {
	// Header writes the "package NAME" line (export does, commit does not).
	Header bool
	// NameAnonymous writes generated names of anonymous sections (uci -n).
	NameAnonymous bool
}

// Export writes c in uci's canonical form: every section preceded by an
// empty line, one TAB before option/list, values in single quotes (a quote
// inside is closed, backslash-escaped and reopened), and a final empty line.
func Export(w io.Writer, c *Config, opt ExportOptions) error {
	bw := bufio.NewWriter(w)
	if opt.Header {
		bw.WriteString("package " + escape(c.Name) + "\n")
	}
	for _, s := range c.Sections {
		bw.WriteString("\nconfig " + escape(s.Type))
		if !s.Anonymous || opt.NameAnonymous {
			bw.WriteString(" '" + escape(s.Name) + "'")
		}
		bw.WriteString("\n")
		for _, o := range s.Options {
			if !o.List {
				v := ""
				if len(o.Values) > 0 {
					v = o.Values[0]
				}
				bw.WriteString("\toption " + escape(o.Name) + " '" + escape(v) + "'\n")
				continue
			}
			for _, v := range o.Values {
				bw.WriteString("\tlist " + escape(o.Name) + " '" + escape(v) + "'\n")
			}
		}
	}
	bw.WriteString("\n")
	return bw.Flush()
}

// Bytes returns the file form of c, as `uci commit` writes it.
func (c *Config) Bytes() []byte {
	var sb strings.Builder
	Export(&sb, c, ExportOptions{})
	return []byte(sb.String())
}

// escape rewrites each single quote as quote, backslash, quote, quote, so
// the text can sit inside single quotes.
func escape(s string) string {
	return strings.ReplaceAll(s, "'", `'\''`)
}

// quote returns s in single quotes, escaped.
func quote(s string) string { return "'" + escape(s) + "'" }
