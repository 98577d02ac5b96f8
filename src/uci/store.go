package uci

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Default directories of the real uci.
const (
	DefaultConfDir  = "/etc/config"
	DefaultSaveDir  = "/tmp/.uci"
	DefaultConf2Dir = "/var/run/uci"
)

// File modes libuci uses when it has nothing to copy from.
const (
	dirMode  = 0o700
	fileMode = 0o600
)

// Store is a uci configuration tree on disk: config files in ConfDir and
// pending changes (delta files) in SaveDir, so that edits made through it
// are seen by the real uci and the other way round.
type Store struct {
	ConfDir string // config files; "" means /etc/config
	// Conf2Dir holds override files that win over ConfDir when present
	// (uci -C); "" means none.
	Conf2Dir string
	SaveDir  string // where new changes are saved; "" means /tmp/.uci
	// DeltaPaths are the directories whose delta files are applied on
	// load, in order; nil means just SaveDir. The real uci always reads
	// /tmp/.uci first and the -t directory after it.
	DeltaPaths []string
	// NonStrict skips statements with errors instead of failing (uci -S).
	NonStrict bool
	// NameAnonymous makes Commit write generated names of anonymous
	// sections, as `uci -n commit` does.
	NameAnonymous bool
	// OnParseError, if set, sees every parse error as it happens (uci -S
	// prints them).
	OnParseError func(*ParseError)

	// opened counts the files Load has read: each read throws away
	// libuci's one parse context, which `uci batch` shares for reading
	// its input, and so restarts the line count of batch errors.
	opened int
}

// Package is a loaded config with the bookkeeping needed to save changes.
type Package struct {
	*Config
	Path     string  // the file it was read from
	HasDelta bool    // changes go to a delta file (it lives in the config dir)
	Saved    []Delta // changes found in delta files at load: `uci changes`
	pending  []Delta // changes made since load and not saved yet
	conf2    bool
}

func (st *Store) confDir() string {
	if st.ConfDir == "" {
		return DefaultConfDir
	}
	return st.ConfDir
}

func (st *Store) saveDir() string {
	if st.SaveDir == "" {
		return DefaultSaveDir
	}
	return st.SaveDir
}

func (st *Store) deltaPaths() []string {
	if st.DeltaPaths == nil {
		return []string{st.saveDir()}
	}
	return st.DeltaPaths
}

// Load reads a package by name (or by a path starting with "/" or "./",
// which is read without delta files) and applies its pending changes.
// Errors are Errno values or a *ParseError.
func (st *Store) Load(name string) (*Package, error) {
	var path string
	hasDelta, conf2 := false, false
	switch {
	case strings.HasPrefix(name, "/") || strings.HasPrefix(name, "./"):
		path = name
		name = name[strings.LastIndexByte(name, '/')+1:]
	case strings.HasPrefix(name, "."):
		return nil, ErrNotFound
	default:
		if !isPackage(name) {
			return nil, ErrInval
		}
		path = filepath.Join(st.confDir(), name)
		if st.Conf2Dir != "" {
			p2 := filepath.Join(st.Conf2Dir, name)
			if _, err := os.Stat(p2); err == nil {
				path, conf2 = p2, true
			}
		}
		hasDelta = true
	}
	if !isPackage(name) {
		return nil, ErrInval
	}
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return nil, ErrNotFound
	}
	data, err := readLocked(path)
	if err != nil {
		return nil, ErrIO
	}
	st.opened++
	cfg, err := st.parse(name, path, data)
	if err != nil {
		return nil, err
	}
	p := &Package{Config: cfg, Path: path, HasDelta: hasDelta, conf2: conf2}
	if hasDelta {
		st.loadDeltas(p, false)
	}
	return p, nil
}

func (st *Store) parse(name, path string, data []byte) (*Config, error) {
	onErr := func(e *ParseError) {
		e.File = path
		if st.OnParseError != nil {
			st.OnParseError(e)
		}
	}
	c, err := parse(name, data, !st.NonStrict, onErr)
	return c, err
}

// loadDeltas applies every delta file of p and returns how many changes
// applied. With flush, the save dir's file is emptied if any did.
func (st *Store) loadDeltas(p *Package, flush bool) int {
	n := 0
	for _, dir := range st.deltaPaths() {
		path := filepath.Join(dir, p.Name)
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		data, err := readLocked(path)
		if err != nil {
			continue
		}
		lines, _ := parseDeltaLines(data)
		for _, t := range lines {
			if t.pkg != p.Name {
				continue
			}
			p.Saved = append(p.Saved, t.d)
			ok, rec := applyDelta(p.Config, t.d)
			p.pending = append(p.pending, rec...)
			if ok {
				n++
			}
		}
	}
	if flush && n > 0 {
		path := filepath.Join(st.saveDir(), p.Name)
		if f, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
			lock(f)
			f.Truncate(0)
			f.Close()
		}
	}
	return n
}

// modeFor is the mode libuci gives a file it creates for package name: the
// config file's, or 0600.
func (st *Store) modeFor(name string) fs.FileMode {
	if fi, err := os.Stat(filepath.Join(st.confDir(), name)); err == nil {
		return fi.Mode().Perm()
	}
	return fileMode
}

// Save appends p's unsaved changes to its delta file in the save dir
// (creating the dir like uci does). A package read from an explicit path
// has no delta file: it is committed instead.
func (st *Store) Save(p *Package) error {
	if !p.HasDelta {
		return st.Commit(p)
	}
	if len(p.pending) == 0 {
		return nil
	}
	dir := st.saveDir()
	if fi, err := os.Stat(dir); err != nil {
		mode := fs.FileMode(dirMode)
		if ci, err := os.Stat(st.confDir()); err == nil {
			mode = ci.Mode().Perm()
		}
		os.Mkdir(dir, mode)
	} else if !fi.IsDir() {
		return ErrIO
	}
	f, err := os.OpenFile(filepath.Join(dir, p.Name), os.O_RDWR|os.O_CREATE, st.modeFor(p.Name))
	if err != nil {
		return ErrIO
	}
	defer f.Close()
	lock(f)
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return ErrIO
	}
	var sb strings.Builder
	for _, d := range p.pending {
		sb.WriteString(d.Line(p.Name))
	}
	p.pending = nil
	if _, err := f.WriteString(sb.String()); err != nil {
		return ErrIO
	}
	return nil
}

// Commit writes the package file with all pending changes applied: saved
// changes of this package are re-read from the delta files (other processes
// may have added some), the save dir's file is emptied and the config file
// replaced atomically. Nothing is written when no change applies.
func (st *Store) Commit(p *Package) error {
	f1, err := os.OpenFile(p.Path, os.O_RDWR|os.O_CREATE, st.modeFor(filepath.Base(p.Path)))
	if err != nil {
		return ErrIO
	}
	defer f1.Close()
	lock(f1)
	if p.HasDelta {
		if err := st.Save(p); err != nil {
			return err
		}
		data, err := io.ReadAll(f1)
		if err != nil {
			return ErrIO
		}
		cfg, err := st.parse(p.Name, p.Path, data)
		if err != nil {
			return err
		}
		fresh := &Package{Config: cfg, Path: p.Path, HasDelta: true, conf2: p.conf2}
		if st.loadDeltas(fresh, true) == 0 {
			return nil
		}
		*p = *fresh
		p.pending = nil
	}
	dir := st.confDir()
	if p.conf2 {
		dir = st.Conf2Dir
	}
	tmp, err := os.CreateTemp(dir, "."+p.Name+".uci-")
	if err != nil {
		return ErrIO
	}
	tmpName := tmp.Name()
	werr := Export(tmp, p.Config, ExportOptions{NameAnonymous: st.NameAnonymous})
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	real, err := filepath.EvalSymlinks(p.Path)
	var fi os.FileInfo
	if err == nil {
		fi, err = os.Stat(real)
	}
	if err == nil && werr == nil {
		if err = os.Chmod(tmpName, fi.Mode().Perm()); err == nil {
			err = os.Rename(tmpName, real)
		}
	}
	if err != nil || werr != nil {
		os.Remove(tmpName)
		return ErrIO
	}
	return nil
}

// Revert drops the saved changes of a package, or of one section or option
// of it, from the save dir's delta file and loads the package again.
// section may be "" (the whole package); option may be "".
func (st *Store) Revert(p *Package, section, option string) (*Package, error) {
	if !p.HasDelta {
		return nil, ErrInval
	}
	if err := st.Save(p); err != nil {
		return nil, err
	}
	st.filterDeltas(p.Name, section, option)
	return st.Load(p.Name)
}

// filterDeltas rewrites the save dir's delta file without the lines that
// match section (and option). A file with an unreadable line is left alone,
// as uci does.
func (st *Store) filterDeltas(name, section, option string) {
	f, err := os.OpenFile(filepath.Join(st.saveDir(), name), os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer f.Close()
	lock(f)
	data, err := io.ReadAll(f)
	if err != nil {
		return
	}
	lines, ok := parseDeltaLines(data)
	if !ok {
		return
	}
	var sb strings.Builder
	for _, t := range lines {
		match := true
		if section != "" && t.d.Section != section {
			match = false
		}
		if match && option != "" && t.d.Option != option {
			match = false
		}
		if !match {
			sb.WriteString(t.d.Line(name))
		}
	}
	if err := f.Truncate(0); err != nil {
		return
	}
	f.WriteAt([]byte(sb.String()), 0)
}

// ListConfigs returns the package names in the config dir, sorted, as uci
// lists them: plain files with valid names and no '.'.
func (st *Store) ListConfigs() ([]string, error) {
	ents, err := os.ReadDir(st.confDir())
	if err != nil {
		return nil, ErrNotFound
	}
	var names []string
	any := false
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, ".") {
			continue
		}
		any = true
		if fi, err := os.Stat(filepath.Join(st.confDir(), n)); err == nil && fi.IsDir() {
			continue
		}
		if strings.Contains(n, ".") || !isPackage(n) {
			continue
		}
		names = append(names, n)
	}
	if !any {
		return nil, ErrNotFound
	}
	sort.Strings(names)
	return names, nil
}

// Edit applies one uci edit to a loaded package and keeps the change for
// Save. op is one of "set", "add_list", "del_list", "delete", "rename",
// "reorder"; address is "package.section[.option][=value]" as on the uci
// command line (the package part must name p).
func (p *Package) Edit(op, address string) error {
	r, err := parseRef(address)
	if err != nil {
		return err
	}
	if r.Package != p.Name {
		return fmt.Errorf("%w: %q is not in package %q", ErrInval, address, p.Name)
	}
	if err := r.resolve(p.Config); err != nil {
		return err
	}
	return p.edit(op, r)
}

func (p *Package) edit(op string, r *ref) error {
	ch := &change{record: true}
	var err error
	switch op {
	case "set":
		err = ch.set(r)
	case "add_list":
		err = ch.addList(r)
	case "del_list":
		err = ch.delList(r)
	case "delete":
		err = ch.remove(r)
	case "rename":
		err = ch.rename(r)
	case "reorder":
		if r.s == nil || !r.HasValue {
			return ErrNotFound
		}
		ch.reorder(p.Config, r.s, cStrtoulInt(r.Value))
	default:
		return fmt.Errorf("%w: unknown edit %q", ErrInval, op)
	}
	p.pending = append(p.pending, ch.deltas...)
	return err
}

// AddSection adds an anonymous section of the given type and returns its
// generated name; the change is kept for Save.
func (p *Package) AddSection(typ string) string {
	ch := &change{record: true}
	s := ch.addSection(p.Config, typ)
	p.pending = append(p.pending, ch.deltas...)
	return s.Name
}

// lock takes an exclusive advisory lock like libuci's flock; it is released
// when the file is closed. Filesystems without flock are fine.
func lock(f *os.File) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}

// readLocked reads a whole file under a shared lock.
func readLocked(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	return io.ReadAll(f)
}
