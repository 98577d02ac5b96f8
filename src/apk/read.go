package apk

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
)

// ErrMalformed marks a file apk would refuse to open as a package.
var ErrMalformed = errors.New("malformed apk package")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Archive is a package read back: its metadata and files.
type Archive struct {
	Name, Version, Arch, Description string
	Maintainer, License, Origin, URL string
	InstalledSize                    uint64
	Depends                          []string
	// Dirs lists every directory entry with its mode, "" for the root.
	Dirs []Dir
	// Files holds every regular file with its recorded hash checked
	// against its data.
	Files   []File
	Scripts map[string][]byte
	// ADB is the uncompressed ADB block, for byte comparisons.
	ADB []byte
}

// Dir is one directory entry of a package.
type Dir struct {
	Name        string
	Mode        fs.FileMode
	User, Group string
	Files       int
}

// File returns the file at the absolute path p.
func (a *Archive) File(p string) (File, bool) {
	for _, f := range a.Files {
		if f.Path == p {
			return f, true
		}
	}
	return File{}, false
}

// reader resolves values of one ADB block.
type reader struct{ b []byte }

func (r reader) at(off, n int) ([]byte, error) {
	if off < 0 || n < 0 || off+n > len(r.b) {
		return nil, malformed("value at %d+%d is outside the %d-byte ADB block", off, n, len(r.b))
	}
	return r.b[off : off+n], nil
}

func (r reader) blob(v value) ([]byte, error) {
	off := int(v & valueMask)
	var n, hdr int
	switch v & typeMask {
	case 0:
		return nil, nil
	case typeBlob8:
		b, err := r.at(off, 1)
		if err != nil {
			return nil, err
		}
		n, hdr = int(b[0]), 1
	case typeBlob16:
		b, err := r.at(off, 2)
		if err != nil {
			return nil, err
		}
		n, hdr = int(binary.LittleEndian.Uint16(b)), 2
	case typeBlob32:
		b, err := r.at(off, 4)
		if err != nil {
			return nil, err
		}
		n, hdr = int(binary.LittleEndian.Uint32(b)), 4
	default:
		return nil, malformed("value %#x is not a blob", uint32(v))
	}
	return r.at(off+hdr, n)
}

func (r reader) str(v value) (string, error) {
	b, err := r.blob(v)
	return string(b), err
}

func (r reader) integer(v value) (uint64, error) {
	off := int(v & valueMask)
	switch v & typeMask {
	case 0:
		return 0, nil
	case typeInt:
		return uint64(off), nil
	case typeInt32:
		b, err := r.at(off, 4)
		if err != nil {
			return 0, err
		}
		return uint64(binary.LittleEndian.Uint32(b)), nil
	case typeInt64:
		b, err := r.at(off, 8)
		if err != nil {
			return 0, err
		}
		return binary.LittleEndian.Uint64(b), nil
	}
	return 0, malformed("value %#x is not an integer", uint32(v))
}

// object returns an object's or array's slots, index 0 unused, padded
// with nulls to at least min entries so absent fields read as null.
func (r reader) object(v value, min int) ([]value, error) {
	out := make([]value, min)
	switch v & typeMask {
	case 0:
		return out, nil
	case typeObject, typeArray:
	default:
		return nil, malformed("value %#x is not an object", uint32(v))
	}
	off := int(v & valueMask)
	b, err := r.at(off, 4)
	if err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n < 1 || n > len(r.b)/4 {
		return nil, malformed("object at %d has %d slots", off, n)
	}
	b, err = r.at(off, 4*n)
	if err != nil {
		return nil, err
	}
	if n > min {
		out = make([]value, n)
	}
	for i := 1; i < n; i++ {
		out[i] = value(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

// Read parses a package as apk opens one: "ADBd" and a raw deflate stream
// (or an uncompressed "ADB."), the pckg schema, one ADB block, then data
// blocks naming their path and file by index. Every file's data must be
// present and match its recorded SHA-256.
func Read(pkg []byte) (*Archive, error) {
	var raw []byte
	switch {
	case bytes.HasPrefix(pkg, []byte(magicDeflate)):
		b, err := io.ReadAll(flate.NewReader(bytes.NewReader(pkg[4:])))
		if err != nil {
			return nil, malformed("deflate stream: %v", err)
		}
		raw = b
	case bytes.HasPrefix(pkg, []byte(magic)):
		raw = pkg
	default:
		return nil, malformed("no ADB magic")
	}
	if len(raw) < 8 || string(raw[:4]) != magic {
		return nil, malformed("no ADB. header inside the compressed stream")
	}
	if s := binary.LittleEndian.Uint32(raw[4:8]); s != schemaPackage {
		return nil, malformed("schema %#x is not a package (pckg)", s)
	}
	blocks, err := splitBlocks(raw[8:])
	if err != nil {
		return nil, err
	}
	if len(blocks) == 0 || blocks[0].typ != blockADB {
		return nil, malformed("first block is not the ADB block")
	}
	a, dirs, err := parseADB(blocks[0].data)
	if err != nil {
		return nil, err
	}
	have := map[[2]int]bool{}
	for _, b := range blocks[1:] {
		switch b.typ {
		case blockSig:
			continue
		case blockData:
		default:
			return nil, malformed("block type %d after the ADB block", b.typ)
		}
		if len(b.data) < 8 {
			return nil, malformed("data block of %d bytes", len(b.data))
		}
		pi, fi := int(binary.LittleEndian.Uint32(b.data)), int(binary.LittleEndian.Uint32(b.data[4:]))
		if pi < 1 || pi > len(dirs) || fi < 1 || fi > len(dirs[pi-1]) {
			return nil, malformed("data block for path %d file %d, which the ADB does not list", pi, fi)
		}
		f := dirs[pi-1][fi-1]
		f.Data = b.data[8:]
		dirs[pi-1][fi-1] = f
		have[[2]int{pi, fi}] = true
	}
	for i, files := range dirs {
		for j, f := range files {
			if f.size > 0 && !have[[2]int{i + 1, j + 1}] {
				return nil, malformed("%s: no data block", f.Path)
			}
			if uint64(len(f.Data)) != f.size {
				return nil, malformed("%s: %d bytes of data, %d recorded", f.Path, len(f.Data), f.size)
			}
			if sum := sha256Of(f.Data); !bytes.Equal(sum, f.hash) {
				return nil, malformed("%s: data does not match its hash", f.Path)
			}
			a.Files = append(a.Files, f.File)
		}
	}
	return a, nil
}

type block struct {
	typ  uint32
	data []byte
}

func splitBlocks(b []byte) ([]block, error) {
	var out []block
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, malformed("truncated block header")
		}
		ts := binary.LittleEndian.Uint32(b)
		typ, size, hdr := ts>>30, uint64(ts&0x3fffffff), uint64(4)
		if typ == blockExt {
			if len(b) < 16 {
				return nil, malformed("truncated extended block header")
			}
			typ, size, hdr = ts&0x3fffffff, binary.LittleEndian.Uint64(b[8:]), 16
		}
		if size < hdr || size > uint64(len(b)) {
			return nil, malformed("block of %d bytes in %d remaining", size, len(b))
		}
		padded := min((size+blockAlign-1)/blockAlign*blockAlign, uint64(len(b)))
		out = append(out, block{typ: typ, data: b[hdr:size]})
		b = b[padded:]
	}
	return out, nil
}

// fileEntry is a file as the ADB lists it, before its data is attached.
type fileEntry struct {
	File
	size uint64
	hash []byte
}

func parseADB(b []byte) (*Archive, [][]fileEntry, error) {
	if len(b) < adbHeaderSize || b[0] != 0 {
		return nil, nil, malformed("ADB block header")
	}
	r := reader{b}
	root, err := r.object(value(binary.LittleEndian.Uint32(b[4:8])), pkgMax)
	if err != nil {
		return nil, nil, err
	}
	info, err := r.object(root[pkgInfo], piMax)
	if err != nil {
		return nil, nil, err
	}
	a := &Archive{Scripts: map[string][]byte{}, ADB: b}
	var errs []error
	get := func(v value) string {
		s, err := r.str(v)
		errs = append(errs, err)
		return s
	}
	a.Name, a.Version, a.Arch = get(info[piName]), get(info[piVersion]), get(info[piArch])
	a.Description, a.Maintainer = get(info[piDescription]), get(info[piMaintainer])
	a.License, a.Origin, a.URL = get(info[piLicense]), get(info[piOrigin]), get(info[piURL])
	a.InstalledSize, err = r.integer(info[piInstalled])
	errs = append(errs, err)
	deps, err := r.object(info[piDepends], 1)
	errs = append(errs, err)
	for _, d := range deps[1:] {
		obj, err := r.object(d, depMax)
		errs = append(errs, err)
		if err == nil {
			a.Depends = append(a.Depends, get(obj[depName]))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}

	paths, err := r.object(root[pkgPaths], 1)
	if err != nil {
		return nil, nil, err
	}
	var dirs [][]fileEntry
	for _, pv := range paths[1:] {
		di, err := r.object(pv, diMax)
		if err != nil {
			return nil, nil, err
		}
		d := Dir{Name: get(di[diName])}
		d.Mode, d.User, d.Group, err = r.acl(di[diACL])
		if err != nil {
			return nil, nil, err
		}
		files, err := r.object(di[diFiles], 1)
		if err != nil {
			return nil, nil, err
		}
		var entries []fileEntry
		for _, fv := range files[1:] {
			fi, err := r.object(fv, fiMax)
			if err != nil {
				return nil, nil, err
			}
			var e fileEntry
			e.Path = path.Join("/", d.Name, get(fi[fiName]))
			if e.Mode, _, _, err = r.acl(fi[fiACL]); err != nil {
				return nil, nil, err
			}
			if e.size, err = r.integer(fi[fiSize]); err != nil {
				return nil, nil, err
			}
			if e.hash, err = r.blob(fi[fiHashes]); err != nil {
				return nil, nil, err
			}
			entries = append(entries, e)
		}
		d.Files = len(entries)
		a.Dirs = append(a.Dirs, d)
		dirs = append(dirs, entries)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}

	scripts, err := r.object(root[pkgScripts], len(ScriptNames)+1)
	if err != nil {
		return nil, nil, err
	}
	for i, name := range ScriptNames {
		if s, err := r.blob(scripts[i+1]); err != nil {
			return nil, nil, err
		} else if s != nil {
			a.Scripts[name] = s
		}
	}
	return a, dirs, nil
}

func (r reader) acl(v value) (fs.FileMode, string, string, error) {
	acl, err := r.object(v, aclMax)
	if err != nil {
		return 0, "", "", err
	}
	mode, err := r.integer(acl[aclMode])
	if err != nil {
		return 0, "", "", err
	}
	user, err1 := r.str(acl[aclUser])
	group, err2 := r.str(acl[aclGroup])
	return fs.FileMode(mode), user, group, errors.Join(err1, err2)
}

func sha256Of(b []byte) []byte {
	sum := sha256.Sum256(b)
	return sum[:]
}
