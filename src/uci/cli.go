package uci

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// CLI is a uci-compatible command line: same commands, flags, output bytes
// and exit codes as OpenWrt's uci for show, export, get, set, add,
// add_list, del_list, delete, rename, reorder, changes, commit, revert,
// batch and import. The zero value uses the real tool's directories.
type CLI struct {
	AppName  string // printed before error messages; "" means "uci"
	ConfDir  string // default config dir; "" means /etc/config
	SaveDir  string // default save dir; "" means /tmp/.uci
	Conf2Dir string // default override dir; "" means /var/run/uci
	// Stdin is what batch and import read without -f; nil means os.Stdin.
	Stdin io.Reader
}

// Run runs one uci command line (without the program name) and returns
// its exit status.
func Run(args []string, stdout, stderr io.Writer) int {
	return (&CLI{}).Run(args, stdout, stderr)
}

// run holds the state of one invocation, like the globals of uci's cli.c.
type run struct {
	app       string
	out       *bufio.Writer
	errw      io.Writer
	store     *Store
	delimiter string
	quiet     bool
	showExt   bool
	noCommit  bool
	perrorOn  bool   // -S: print every parse error as it happens
	errorInfo string // libuci's static error_info buffer, quirks included

	merge   bool      // -m: import merges into the existing package
	stdin   io.Reader // the input batch and import read (-f or stdin)
	in      *lexer    // that input once read, shared by batch and import
	inBatch bool      // inside `uci batch`: batch is unknown, 255 is not usage
	opened  int       // r.store.opened when the batch lexer was last reset
}

// Run runs one uci command line (without the program name) and returns
// its exit status.
func (c *CLI) Run(args []string, stdout, stderr io.Writer) int {
	r := &run{app: c.AppName, errw: stderr, delimiter: " ", showExt: true}
	if r.app == "" {
		r.app = "uci"
	}
	r.out = bufio.NewWriter(stdout)
	defer r.out.Flush()

	defaultSave := c.SaveDir
	if defaultSave == "" {
		defaultSave = DefaultSaveDir
	}
	st := &Store{ConfDir: c.ConfDir, SaveDir: defaultSave, Conf2Dir: c.Conf2Dir, DeltaPaths: []string{defaultSave}}
	if st.Conf2Dir == "" {
		st.Conf2Dir = DefaultConf2Dir
	}
	r.store = st
	st.OnParseError = func(e *ParseError) {
		if r.perrorOn {
			r.perrorTo("", e)
		}
	}

	opts, rest, bad := getopt(args, "c:C:d:f:LmnNp:P:qsSt:X")
	if bad != "" {
		fmt.Fprintf(stderr, "%s: %s\n", r.app, bad)
		r.usage()
		return 0
	}
	for _, o := range opts {
		switch o.name {
		case 'c':
			st.ConfDir = o.arg
		case 'C':
			st.Conf2Dir = o.arg
		case 'd':
			r.delimiter = o.arg
		case 'f':
			// Opened now, as uci does, so a missing file fails every
			// command; only batch and import read it.
			if r.stdin != nil {
				if !r.quiet {
					fmt.Fprint(stderr, "Too many input files.\n")
				}
				return 1
			}
			f, err := os.Open(o.arg)
			if err != nil {
				if !r.quiet {
					fmt.Fprintf(stderr, "uci: %s", cErrText(err))
				}
				return 1
			}
			defer f.Close()
			r.stdin = f
		case 'm':
			r.merge = true
		case 's':
			st.NonStrict = false
		case 'S':
			st.NonStrict = true
			r.perrorOn = true
		case 'n':
			st.NameAnonymous = true
		case 'N':
			st.NameAnonymous = false
		case 'p':
			r.addDeltaPath(o.arg)
		case 'P':
			r.setSaveDir(o.arg)
			r.noCommit = true
		case 'q':
			r.quiet = true
		case 't':
			r.setSaveDir(o.arg)
		case 'X':
			r.showExt = false
		default: // -L is in uci's option string but has no case: usage
			r.usage()
			return 0
		}
	}
	if r.stdin == nil {
		r.stdin = c.Stdin
		if r.stdin == nil {
			r.stdin = os.Stdin
		}
	}
	if len(rest) < 1 {
		r.usage()
		return 0
	}
	ret := r.cmd(rest)
	if ret == 255 {
		r.usage()
	}
	return ret
}

// setSaveDir is uci_set_savedir: the dir moves to the end of the delta
// path and becomes where changes are saved.
func (r *run) setSaveDir(dir string) {
	paths := r.store.DeltaPaths[:0:0]
	for _, p := range r.store.DeltaPaths {
		if p != dir {
			paths = append(paths, p)
		}
	}
	r.store.DeltaPaths = append(paths, dir)
	r.store.SaveDir = dir
}

// addDeltaPath is uci_add_delta_path: read before the save dir; a
// duplicate is refused silently.
func (r *run) addDeltaPath(dir string) {
	for _, p := range r.store.DeltaPaths {
		if p == dir {
			return
		}
	}
	n := len(r.store.DeltaPaths)
	paths := append([]string{}, r.store.DeltaPaths[:n-1]...)
	r.store.DeltaPaths = append(append(paths, dir), r.store.DeltaPaths[n-1])
}

func (r *run) cmd(argv []string) int {
	switch strings.ToLower(argv[0]) {
	case "show":
		return r.packageCmd("show", argv)
	case "changes":
		return r.packageCmd("changes", argv)
	case "export":
		return r.packageCmd("export", argv)
	case "commit":
		return r.packageCmd("commit", argv)
	case "get":
		return r.sectionCmd("get", argv)
	case "set":
		return r.sectionCmd("set", argv)
	case "ren", "rename":
		return r.sectionCmd("rename", argv)
	case "revert":
		return r.sectionCmd("revert", argv)
	case "reorder":
		return r.sectionCmd("reorder", argv)
	case "del", "delete":
		return r.sectionCmd("delete", argv)
	case "add_list":
		return r.sectionCmd("add_list", argv)
	case "del_list":
		return r.sectionCmd("del_list", argv)
	case "add":
		return r.add(argv)
	case "help":
		r.usage()
		return 0
	case "batch":
		if !r.inBatch {
			return r.batch()
		}
	case "import":
		return r.importCmd(argv)
	}
	return 255
}

// lookup is uci_lookup_ptr: parse the address, load the package, resolve.
func (r *run) lookup(tuple string) (*ref, *Package, error) {
	ptr, err := parseRef(tuple)
	if err != nil {
		return nil, nil, err
	}
	p, err := r.store.Load(ptr.Package)
	if err != nil {
		return nil, nil, err
	}
	if err := ptr.resolve(p.Config); err != nil {
		return nil, nil, err
	}
	return ptr, p, nil
}

func (r *run) packageCmd(cmd string, argv []string) int {
	if len(argv) > 2 {
		return 255
	}
	if len(argv) == 2 {
		return r.packageCmdOne(cmd, argv[1])
	}
	names, err := r.store.ListConfigs()
	if err != nil {
		r.perror(err)
		return 1
	}
	for _, n := range names {
		r.packageCmdOne(cmd, n)
	}
	return 0
}

func (r *run) packageCmdOne(cmd, tuple string) int {
	ptr, p, err := r.lookup(tuple)
	if err != nil {
		r.perror(err)
		return 1
	}
	switch cmd {
	case "changes":
		for _, d := range p.Saved {
			r.out.WriteString(d.ChangeLine(p.Name))
		}
	case "commit":
		if r.noCommit {
			return 0
		}
		if err := r.store.Commit(p); err != nil {
			r.perror(err)
			return 1
		}
	case "export":
		Export(r.out, p.Config, ExportOptions{Header: true, NameAnonymous: r.store.NameAnonymous})
	case "show":
		if !ptr.complete {
			r.perror(ErrNotFound)
			return 1
		}
		switch {
		case ptr.o != nil:
			r.showOption(p.Name, ptr.s.Name, ptr.o)
		case ptr.s != nil:
			r.showSection(p.Name, ptr.s.Name, ptr.s)
		default:
			r.showPackage(p.Config)
		}
	}
	return 0
}

func (r *run) sectionCmd(cmd string, argv []string) int {
	if len(argv) != 2 {
		return 255
	}
	ptr, p, err := r.lookup(argv[1])
	if err != nil {
		r.perror(err)
		return 1
	}
	if ptr.HasValue && (cmd == "get" || cmd == "revert") {
		return 1
	}
	switch cmd {
	case "get":
		if !ptr.complete {
			r.perror(ErrNotFound)
			return 1
		}
		if ptr.o != nil {
			r.showValue(ptr.o, false)
		} else if ptr.s != nil {
			r.out.WriteString(ptr.s.Type + "\n")
		}
		return 0
	case "revert":
		option := ptr.Option
		section := ""
		if ptr.hasSection() {
			section = ptr.Section
		}
		r.store.Revert(p, section, option)
		return 0
	case "delete":
		if ptr.HasValue {
			if _, n := cSscanfInt(ptr.Value); n == 0 {
				return 1
			}
		}
	}
	err = p.edit(cmd, ptr)
	if err == nil {
		err = r.store.Save(p)
	}
	if err != nil {
		r.perror(err)
		return 1
	}
	return 0
}

// add is `uci add CONFIG TYPE`: its exit status is libuci's error number.
func (r *run) add(argv []string) int {
	if len(argv) != 3 {
		return 255
	}
	p, err := r.store.Load(argv[1])
	if err == nil {
		name := p.AddSection(argv[2])
		if err = r.store.Save(p); err == nil {
			fmt.Fprintf(r.out, "%s\n", name)
			return 0
		}
	}
	r.perror(err)
	return int(errnoOf(err))
}

func errnoOf(err error) Errno {
	var pe *ParseError
	if errors.As(err, &pe) {
		return ErrParse
	}
	var e Errno
	if errors.As(err, &e) {
		return e
	}
	return ErrUnknown
}

// perror prints an error like cli_perror (uci_perror with the program name).
func (r *run) perror(err error) {
	if r.quiet {
		return
	}
	r.perrorTo(r.app, err)
}

// perrorTo is uci_get_errorstr printing to stderr. libuci keeps the
// " (reason) at line L, byte B" part in a static buffer that is rewritten
// only for parse errors and gets a newline appended on every call; that is
// reproduced.
func (r *run) perrorTo(prefix string, err error) {
	var pe *ParseError
	if errors.As(err, &pe) {
		info := fmt.Sprintf(" (%s) at line %d, byte %d", pe.Msg, pe.Line, pe.Byte)
		if len(info) > 126 {
			info = info[:126]
		}
		r.errorInfo = info
	}
	r.errorInfo += "\n"
	p := ""
	if prefix != "" {
		p = prefix + ": "
	}
	r.out.Flush()
	fmt.Fprintf(r.errw, "%s%s%s", p, errnoOf(err).Error(), r.errorInfo)
}

// cErrText is strerror's text for the common open errors.
func cErrText(err error) string {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "No such file or directory"
	case errors.Is(err, os.ErrPermission):
		return "Permission denied"
	}
	return err.Error()
}
