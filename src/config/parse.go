package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"surflare-watchdog/src/suggest"
	"surflare-watchdog/src/uci"
)

// Error is one problem in the file, located as precisely as the file allows.
type Error struct {
	File    string
	Line    int    // 1-based; 0 when the problem has no line (e.g. a section that is missing)
	Section string // "main", "@probe[1]"; "" for problems of the file as a whole
	Option  string // "" for problems of a whole section
	Msg     string
}

// Error formats the problem as FILE:LINE: section.option: message.
func (e Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Section != "" {
		b.WriteString(e.Section)
		if e.Option != "" {
			b.WriteString("." + e.Option)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in one file, in file order. Parse and
// Load return it as their error so a user fixes everything in one go.
type ErrorList []Error

// WriteErrors prints a Load error for people: each problem of an ErrorList
// on its own line and how many there are, anything else (an unreadable
// file) as one message.
func WriteErrors(w io.Writer, err error) {
	var list ErrorList
	if errors.As(err, &list) {
		for _, e := range list {
			fmt.Fprintln(w, e.Error())
		}
		plural := "s"
		if len(list) == 1 {
			plural = ""
		}
		fmt.Fprintf(w, "%d error%s\n", len(list), plural)
		return
	}
	fmt.Fprintf(w, "surflare-watchdog: %v\n", err)
}

// WriteWarnings prints Load's warnings for people: each on its own line,
// then what they mean, since a misspelled option is easy to overlook when
// the file still loads: it is ignored and the option keeps its default.
func WriteWarnings(w io.Writer, warns []Warning) {
	for _, x := range warns {
		fmt.Fprintf(w, "warning: %s\n", x)
	}
	switch len(warns) {
	case 0:
	case 1:
		fmt.Fprintln(w, "1 warning: what it names is IGNORED (the default applies instead); fix it or remove it")
	default:
		fmt.Fprintf(w, "%d warnings: what they name is IGNORED (the defaults apply instead); fix them or remove them\n", len(warns))
	}
}

// Error joins the problems one a line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Warning is something in the file the watchdog ignores (an unknown option
// or section); same format as Error.
type Warning Error

// String formats the warning as FILE:LINE: section.option: message.
func (w Warning) String() string { return Error(w).Error() }

// Load reads and parses a config file. The error is an ErrorList when the
// file was read, and wraps the read error (fs.ErrNotExist...) otherwise.
func Load(path string) (*Config, []Warning, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config: %w", err)
	}
	defer f.Close()
	// Bounded: a config replaced by a huge file (or a link to /dev/zero)
	// must fail the load, not fill the router's memory on every SIGHUP.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("reading config: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, nil, fmt.Errorf("reading config: %s is larger than %d KiB: not a UCI config", path, MaxFileSize>>10)
	}
	return Parse(path, data)
}

// MaxFileSize bounds the config file Load reads (a real one is a few KiB).
const MaxFileSize = 1 << 20

// Parse parses the UCI text of a config file; path is used in messages and
// as the UCI package name. Options and sections the file does not set keep
// their defaults; `config probe` sections in the file replace the default
// probes as a whole. On error the config is nil and the error is an
// ErrorList with every problem.
func Parse(path string, data []byte) (*Config, []Warning, error) {
	// Non-strict, so every syntax error is reported at once. The values
	// are not checked then: what follows a broken line may have been
	// attached to the wrong section, and would only add confusing errors.
	u, perrs := uci.ParseNonStrict(filepath.Base(path), data)
	if len(perrs) > 0 {
		list := make(ErrorList, len(perrs))
		for i, pe := range perrs {
			list[i] = Error{File: path, Line: pe.Line, Msg: "syntax error: " + pe.Msg}
		}
		return nil, nil, list
	}
	p := &parser{file: path, cfg: Default(), lines: map[string]int{}, labels: map[string]string{}}
	p.sections(u)
	p.validate()
	slices.SortStableFunc(p.errs, func(a, b Error) int { return a.Line - b.Line })
	if len(p.errs) > 0 {
		return nil, p.warns, p.errs
	}
	return p.cfg, p.warns, nil
}

// parser collects problems while binding one file onto a default config.
type parser struct {
	file  string
	cfg   *Config
	errs  ErrorList
	warns []Warning
	// lines maps "section" and "section.option" (as labelled in messages)
	// to their line, for checks that span options.
	lines map[string]int
	// labels maps a once-only section type to its label in this file.
	labels map[string]string
}

func (p *parser) errorf(line int, section, opt, format string, args ...any) {
	p.errs = append(p.errs, Error{p.file, line, section, opt, fmt.Sprintf(format, args...)})
}

func (p *parser) warnf(line int, section, opt, format string, args ...any) {
	p.warns = append(p.warns, Warning{p.file, line, section, opt, fmt.Sprintf(format, args...)})
}

// lineOf is the line of section.option, else of the section, else 0.
func (p *parser) lineOf(section, opt string) int {
	if l, ok := p.lines[section+"."+opt]; ok {
		return l
	}
	return p.lines[section]
}

// sections binds every section of the file in order.
func (p *parser) sections(u *uci.Config) {
	singles := map[string]singleton{}
	for _, s := range p.cfg.singletons() {
		singles[s.typ] = s
	}
	first := map[string]*uci.Section{} // singleton type -> where it was declared
	index := map[string]int{}          // type -> count so far, for @type[i] labels
	var probes, bypass bool            // the file has sections of these types
	for _, s := range u.Sections {
		label := s.Name
		if s.Anonymous {
			label = fmt.Sprintf("@%s[%d]", s.Type, index[s.Type])
		}
		index[s.Type]++
		p.lines[label] = s.Line
		switch {
		case singles[s.Type].typ != "":
			if f := first[s.Type]; f != nil {
				p.errorf(s.Line, label, "", "a second %q section (the first is at line %d): merge them", s.Type, f.Line)
				continue
			}
			first[s.Type] = s
			p.labels[s.Type] = label
			p.bind(s, label, singles[s.Type].options)
		case s.Type == typeProbe:
			if !probes {
				p.cfg.Probes, probes = nil, true
				p.lines["@"+typeProbe] = s.Line
			}
			pr := Probe{Name: sectionName(s)}
			p.bind(s, label, pr.options())
			p.require(s, label, "kind", "url")
			p.cfg.Probes = append(p.cfg.Probes, pr)
		case s.Type == typeBypass:
			if !bypass {
				p.cfg.Bypass, bypass = nil, true
			}
			b := Bypass{Section: sectionName(s)}
			p.bind(s, label, b.options())
			p.require(s, label, "mac")
			p.cfg.Bypass = append(p.cfg.Bypass, b)
		default:
			types := []string{typeProbe, typeBypass}
			for t := range singles {
				types = append(types, t)
			}
			slices.Sort(types) // ties in Closest keep this order: the same answer every run
			p.warnf(s.Line, label, "", "unknown section type %q%s (ignored)", s.Type, suggest.DidYouMean(s.Type, types, 1))
		}
	}
}

func sectionName(s *uci.Section) string {
	if s.Anonymous {
		return ""
	}
	return s.Name
}

// bind sets each option of s through the schema; unknown options are
// warnings, bad values errors.
func (p *parser) bind(s *uci.Section, label string, opts []option) {
	known := make(map[string]option, len(opts))
	names := make([]string, len(opts))
	for i, o := range opts {
		known[o.name] = o
		names[i] = o.name
	}
	for _, o := range s.Options {
		p.lines[label+"."+o.Name] = o.Line
		d, ok := known[o.Name]
		switch {
		case !ok:
			// A misspelled option only warns (the file loads, the option
			// keeps its default), so the warning names the spelling that works.
			p.warnf(o.Line, label, o.Name, "unknown option%s (ignored)", suggest.DidYouMean(o.Name, names, 1))
		case o.List && !d.list:
			p.errorf(o.Line, label, o.Name, "takes one value: write `option %s`, not `list %s`", o.Name, o.Name)
		case len(o.Values) == 0:
			// UCI drops empty options before we see them; nothing to set.
		default:
			if err := d.v.set(o.Values); err != nil {
				for _, msg := range strings.Split(err.Error(), "\n") {
					p.errorf(o.Line, label, o.Name, "%s", msg)
				}
			}
		}
	}
}

// require reports options a repeated section cannot do without.
func (p *parser) require(s *uci.Section, label string, names ...string) {
	for _, n := range names {
		if s.Option(n) == nil {
			p.errorf(s.Line, label, "", "missing option %s", n)
		}
	}
}
