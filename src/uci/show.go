package uci

import (
	"fmt"
	"io"
	"strings"
)

// showPackage prints every section as `uci show` does: anonymous sections
// as @type[i] (i counts all sections of that type, named ones too) unless
// -X asked for their generated names.
func (r *run) showPackage(c *Config) {
	idx := map[string]int{}
	for _, s := range c.Sections {
		ref := s.Name
		if r.showExt {
			if s.Anonymous {
				ref = fmt.Sprintf("@%s[%d]", s.Type, idx[s.Type])
			}
			idx[s.Type]++
		}
		r.showSection(c.Name, ref, s)
	}
}

func (r *run) showSection(pkg, ref string, s *Section) {
	r.out.WriteString(pkg + "." + ref + "=" + s.Type + "\n")
	for _, o := range s.Options {
		r.showOption(pkg, ref, o)
	}
}

func (r *run) showOption(pkg, ref string, o *Option) {
	r.out.WriteString(pkg + "." + ref + "." + o.Name + "=")
	r.showValue(o, true)
}

// showValue prints an option's value: quoted for show, raw for get; list
// items joined by the delimiter, and for get quoted only when they contain
// whitespace.
func (r *run) showValue(o *Option, q bool) {
	if !o.List {
		v := ""
		if len(o.Values) > 0 {
			v = o.Values[0]
		}
		if q {
			v = quote(v)
		}
		r.out.WriteString(v + "\n")
		return
	}
	for i, v := range o.Values {
		if i > 0 {
			r.out.WriteString(r.delimiter)
		}
		if q || strings.ContainsAny(v, " \t\r\n") {
			v = quote(v)
		}
		r.out.WriteString(v)
	}
	r.out.WriteString("\n")
}

// usage prints uci's help text to stderr, as uci does.
func (r *run) usage() {
	r.out.Flush()
	writeUsage(r.errw, r.app)
}

// Usage writes uci's help text.
func (c *CLI) Usage(w io.Writer) {
	app := c.AppName
	if app == "" {
		app = "uci"
	}
	writeUsage(w, app)
}

func writeUsage(w io.Writer, app string) {
	fmt.Fprintf(w, "Usage: %s [<options>] <command> [<arguments>]\n\n"+
		"Commands:\n"+
		"\tbatch\n"+
		"\texport     [<config>]\n"+
		"\timport     [<config>]\n"+
		"\tchanges    [<config>]\n"+
		"\tcommit     [<config>]\n"+
		"\tadd        <config> <section-type>\n"+
		"\tadd_list   <config>.<section>.<option>=<string>\n"+
		"\tdel_list   <config>.<section>.<option>=<string>\n"+
		"\tshow       [<config>[.<section>[.<option>]]]\n"+
		"\tget        <config>.<section>[.<option>]\n"+
		"\tset        <config>.<section>[.<option>]=<value>\n"+
		"\tdelete     <config>[.<section>[[.<option>][=<id>]]]\n"+
		"\trename     <config>.<section>[.<option>]=<name>\n"+
		"\trevert     <config>[.<section>[.<option>]]\n"+
		"\treorder    <config>.<section>=<position>\n"+
		"\n"+
		"Options:\n"+
		"\t-c <path>  set the search path for config files (default: %s)\n"+
		"\t-C <path>  set the search path for config override files (default: %s)\n"+
		"\t-d <str>   set the delimiter for list values in uci show\n"+
		"\t-f <file>  use <file> as input instead of stdin\n"+
		"\t-m         when importing, merge data into an existing package\n"+
		"\t-n         name unnamed sections on export (default)\n"+
		"\t-N         don't name unnamed sections\n"+
		"\t-p <path>  add a search path for config change files\n"+
		"\t-P <path>  add a search path for config change files and use as default\n"+
		"\t-t <path>  set save path for config change files\n"+
		"\t-q         quiet mode (don't print error messages)\n"+
		"\t-s         force strict mode (stop on parser errors, default)\n"+
		"\t-S         disable strict mode\n"+
		"\t-X         do not use extended syntax on 'show'\n"+
		"\n", app, DefaultConfDir, DefaultConf2Dir)
}

// option is one parsed command-line flag.
type option struct {
	name byte
	arg  string
}

// getopt parses flags like glibc getopt with this option string: flags may
// be clustered (-qX), take their argument attached or as the next word, and
// may appear after the command words, which are returned in order. "--"
// ends the flags. bad is glibc's complaint for an unknown flag or a missing
// argument.
func getopt(args []string, spec string) (opts []option, rest []string, bad string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			rest = append(rest, a)
			continue
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			k := strings.IndexByte(spec, c)
			if k < 0 || c == ':' {
				return opts, rest, fmt.Sprintf("invalid option -- '%c'", c)
			}
			if k+1 < len(spec) && spec[k+1] == ':' {
				if j+1 < len(a) {
					opts = append(opts, option{c, a[j+1:]})
				} else if i+1 < len(args) {
					i++
					opts = append(opts, option{c, args[i]})
				} else {
					return opts, rest, fmt.Sprintf("option requires an argument -- '%c'", c)
				}
				break
			}
			opts = append(opts, option{c, ""})
		}
	}
	return opts, rest, ""
}
