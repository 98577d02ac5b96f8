package apk

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Field numbers of the schemas a package uses (apk-tools' apk_adb.h).
const (
	piName        = 1
	piVersion     = 2
	piHashes      = 3
	piDescription = 4
	piArch        = 5
	piLicense     = 6
	piOrigin      = 7
	piMaintainer  = 8
	piURL         = 9
	piInstalled   = 12
	piDepends     = 15
	piMax         = 22

	depName = 1
	depMax  = 4

	aclMode  = 1
	aclUser  = 2
	aclGroup = 3
	aclMax   = 5

	fiName   = 1
	fiACL    = 2
	fiSize   = 3
	fiMtime  = 4
	fiHashes = 5
	fiMax    = 7

	diName  = 1
	diACL   = 2
	diFiles = 3
	diMax   = 4

	pkgInfo    = 1
	pkgPaths   = 2
	pkgScripts = 3
	pkgMax     = 6
)

// Script names apk runs, in the order of the scripts schema (field 1 is
// the trigger script).
var ScriptNames = []string{"trigger", "pre-install", "post-install", "pre-deinstall", "post-deinstall", "pre-upgrade", "post-upgrade"}

const (
	// schemaPackage is "pckg", the schema id of a package file.
	schemaPackage = 0x676b6370
	// magic starts every ADB file; "ADBd" announces a deflated one.
	magic        = "ADB."
	magicDeflate = "ADBd"

	// NoArch is the architecture of a package that runs anywhere (opkg's
	// "all"; OpenWrt maps one to the other).
	NoArch = "noarch"

	// uniqueIDSize is the length of the "hashes" info field mkpkg fills
	// with the first bytes of the ADB block's SHA-256 (a SHA-1-sized id).
	uniqueIDSize = 20

	// owner is the user and group of every path: packages are built as
	// root and install root-owned files.
	owner = "root"
)

// File is one regular file of a package.
type File struct {
	// Path is the absolute path on the target.
	Path string
	// Mode holds the permission bits.
	Mode fs.FileMode
	Data []byte
}

// Package is everything needed to write one .apk.
type Package struct {
	Name, Version, Arch               string
	Description, License, Origin, URL string
	Maintainer                        string
	Depends                           []string
	Files                             []File
	// Scripts maps a script name (see ScriptNames) to its text.
	Scripts map[string][]byte
}

// FileName is OpenWrt's name for the package file: NAME-VERSION.apk (the
// architecture is the directory's, not the file's).
func (p *Package) FileName() string { return p.Name + "-" + p.Version + ".apk" }

// InstalledSize is the sum of the regular files' sizes, at least 1 as
// mkpkg records it.
func (p *Package) InstalledSize() int64 {
	var n int64
	for _, f := range p.Files {
		n += int64(len(f.Data))
	}
	return max(n, 1)
}

func (p *Package) validate() error {
	if !ValidName(p.Name) {
		return fmt.Errorf("name %q: apk takes letters, digits and + - . _, starting with a letter or digit", p.Name)
	}
	if !ValidVersion(p.Version) {
		return fmt.Errorf("version %q is not an apk version (want e.g. 1.2.3-r4)", p.Version)
	}
	if p.Arch == "" || strings.ContainsAny(p.Arch, " \t\n/") {
		return fmt.Errorf("arch %q is not an architecture name", p.Arch)
	}
	if strings.ContainsAny(p.Description+p.Maintainer+p.License+p.Origin+p.URL, "\n\r") {
		// apk writes these to its line-based installed database, which
		// a newline corrupts ("v2 database format error" on the next run).
		return fmt.Errorf("description, maintainer, license, origin and url must be one line each")
	}
	for _, d := range p.Depends {
		if !validDependency(d) {
			return fmt.Errorf("dependency %q is not a package name", d)
		}
	}
	seen := map[string]bool{}
	for _, f := range p.Files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return fmt.Errorf("file %q: path must be absolute and clean", f.Path)
		}
		if seen[f.Path] {
			return fmt.Errorf("file %q: listed twice", f.Path)
		}
		seen[f.Path] = true
		if f.Mode&^fs.ModePerm != 0 {
			return fmt.Errorf("file %q: mode %v is not plain permission bits", f.Path, f.Mode)
		}
	}
	for _, f := range p.Files {
		for d := path.Dir(f.Path); d != "/"; d = path.Dir(d) {
			if seen[d] {
				return fmt.Errorf("file %q: %s is a file, not a directory", f.Path, d)
			}
		}
	}
	for name, text := range p.Scripts {
		if !slices.Contains(ScriptNames, name) {
			return fmt.Errorf("script %q: apk only runs %s", name, strings.Join(ScriptNames, ", "))
		}
		if !bytes.HasPrefix(text, []byte("#!")) {
			return fmt.Errorf("script %s: must start with #! (apk executes it)", name)
		}
	}
	return nil
}

// dir is one directory of the package and its regular files, sorted.
type dir struct {
	name  string // relative to /, "" for the root
	files []File
}

// tree groups the files by directory, with every parent directory present
// (mkpkg lists each directory of the tree, the root included), sorted by
// name as mkpkg's path array is.
func (p *Package) tree() []dir {
	byName := map[string]*dir{"": {}}
	var add func(name string) *dir
	add = func(name string) *dir {
		if d, ok := byName[name]; ok {
			return d
		}
		parent := path.Dir(name)
		if parent == "." {
			parent = ""
		}
		add(parent)
		d := &dir{name: name}
		byName[name] = d
		return d
	}
	for _, f := range p.Files {
		rel := strings.TrimPrefix(f.Path, "/")
		d := path.Dir(rel)
		if d == "." {
			d = ""
		}
		dd := add(d)
		dd.files = append(dd.files, f)
	}
	var out []dir
	for _, d := range byName {
		slices.SortFunc(d.files, func(a, b File) int { return strings.Compare(path.Base(a.Path), path.Base(b.Path)) })
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b dir) int { return strings.Compare(a.name, b.name) })
	return out
}

// Build writes the package: the ADB block laid out as mkpkg lays it out,
// one data block per non-empty file, the whole deflated behind "ADBd".
func (p *Package) Build() ([]byte, error) {
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("building %s: %w", p.FileName(), err)
	}
	w := newWriter()

	// Info fields in field order, as mkpkg assigns them.
	info := make([]value, piMax)
	info[piName] = w.str(p.Name)
	info[piVersion] = w.str(p.Version)
	info[piDescription] = w.str(p.Description)
	info[piArch] = w.str(p.Arch)
	info[piLicense] = w.str(p.License)
	info[piOrigin] = w.str(p.Origin)
	info[piMaintainer] = w.str(p.Maintainer)
	info[piURL] = w.str(p.URL)
	info[piDepends] = w.dependencies(p.Depends)

	// Every directory with its files, root first, then the path array.
	dirs := p.tree()
	paths := make([]value, 1, len(dirs)+1)
	for _, d := range dirs {
		files := make([]value, 1, len(d.files)+1)
		for _, f := range d.files {
			sum := sha256.Sum256(f.Data)
			fi := make([]value, fiMax)
			fi[fiName] = w.str(path.Base(f.Path))
			fi[fiHashes] = w.blob(sum[:])
			fi[fiMtime] = w.integer(0)
			fi[fiSize] = w.integer(uint64(len(f.Data)))
			fi[fiACL] = w.acl(uint64(f.Mode.Perm()))
			files = append(files, w.object(fi, typeObject))
		}
		di := make([]value, diMax)
		di[diName] = w.str(d.name)
		di[diACL] = w.acl(0o755)
		di[diFiles] = w.object(files, typeObject)
		paths = append(paths, w.object(di, typeObject))
	}

	info[piInstalled] = w.integer(uint64(p.InstalledSize()))
	var idAt int
	info[piHashes], idAt = w.blobRaw(make([]byte, uniqueIDSize))

	pkg := make([]value, pkgMax)
	pkg[pkgInfo] = w.object(info, typeObject)
	pkg[pkgPaths] = w.object(paths, typeObject)
	if len(p.Scripts) > 0 {
		scripts := make([]value, len(ScriptNames)+1)
		for i, name := range ScriptNames {
			scripts[i+1] = w.blob(p.Scripts[name])
		}
		pkg[pkgScripts] = w.object(scripts, typeObject)
	}
	w.setRoot(w.object(pkg, typeObject))

	// The unique id: the ADB block's SHA-256 with the id still zero.
	sum := sha256.Sum256(w.buf)
	copy(w.buf[idAt:], sum[:uniqueIDSize])

	out := binary.LittleEndian.AppendUint32([]byte(magic), schemaPackage)
	out = appendBlock(out, blockADB, w.buf)
	for i, d := range dirs {
		for j, f := range d.files {
			if len(f.Data) == 0 {
				continue
			}
			hdr := binary.LittleEndian.AppendUint32(nil, uint32(i+1))
			hdr = binary.LittleEndian.AppendUint32(hdr, uint32(j+1))
			out = appendBlock(out, blockData, hdr, f.Data)
		}
	}

	var z bytes.Buffer
	z.WriteString(magicDeflate)
	zw, err := flate.NewWriter(&z, flate.BestCompression)
	if err != nil {
		return nil, fmt.Errorf("building %s: %w", p.FileName(), err)
	}
	if _, err := zw.Write(out); err != nil {
		return nil, fmt.Errorf("building %s: deflate: %w", p.FileName(), err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("building %s: deflate: %w", p.FileName(), err)
	}
	return z.Bytes(), nil
}

// acl writes a root-owned ACL object with the given mode.
func (w *writer) acl(mode uint64) value {
	acl := make([]value, aclMax)
	acl[aclMode] = w.integer(mode)
	acl[aclUser] = w.str(owner)
	acl[aclGroup] = w.str(owner)
	return w.object(acl, typeObject)
}

// dependencies writes each dependency object in the given order, then the
// array sorted by name with duplicates dropped (adb_wa_sort_unique).
func (w *writer) dependencies(names []string) value {
	type dep struct {
		name string
		v    value
	}
	var deps []dep
	for _, n := range names {
		obj := make([]value, depMax)
		obj[depName] = w.str(n)
		deps = append(deps, dep{n, w.object(obj, typeObject)})
	}
	slices.SortStableFunc(deps, func(a, b dep) int { return strings.Compare(a.name, b.name) })
	arr := []value{0}
	for i, d := range deps {
		if i > 0 && d.v == deps[i-1].v {
			continue
		}
		arr = append(arr, d.v)
	}
	return w.object(arr, typeObject)
}
