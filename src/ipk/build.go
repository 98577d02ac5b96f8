package ipk

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Layout constants of an OpenWrt .ipk, as opkg-lede reads it and as the
// accepted fixture sample was made (GNU tar --owner=0 --group=0
// --numeric-owner --sort=name --mtime=@0 -czf).
const (
	// MemberDebianBinary, MemberData and MemberControl are the outer tar's
	// members in the order OpenWrt's ipkg-build writes them. opkg only looks
	// for the last two (by name, after stripping "./").
	MemberDebianBinary = "./debian-binary"
	MemberData         = "./data.tar.gz"
	MemberControl      = "./control.tar.gz"

	// DebianBinary is the content of ./debian-binary. opkg never reads it;
	// it is there so the layout matches every other ipk.
	DebianBinary = "2.0\n"

	// gzipOSUnix is the OS byte GNU gzip writes; Go writes 255 (unknown)
	// unless told, which would make our output differ from GNU tar's for no
	// reason.
	gzipOSUnix = 3
)

// epoch is the fixed mtime of every entry, so the same input always gives
// byte-identical packages (reproducible builds, meaningful checksums).
var epoch = time.Unix(0, 0)

// ScriptNames are the maintainer scripts opkg runs, in the order it knows them.
var ScriptNames = []string{"preinst", "postinst", "prerm", "postrm"}

// File is one regular file of a package's data.
type File struct {
	// Path is the absolute path on the target, e.g. "/usr/bin/surflare-watchdog".
	Path string
	// Mode holds the permission bits (0755 for programs and init scripts).
	Mode fs.FileMode
	Data []byte
	// Conffile marks a file the user edits: opkg keeps the user's copy on
	// upgrade (the new one lands next to it as <path>-opkg) and on removal.
	Conffile bool
}

// Package is everything needed to write one .ipk.
type Package struct {
	// Control must carry at least Package, Version and Architecture.
	// Installed-Size is computed by Build.
	Control Control
	Files   []File
	// Scripts maps a maintainer script name (see ScriptNames) to its text.
	Scripts map[string][]byte
}

var (
	// Package names as OpenWrt allows them (lower case, digits, + - .).
	namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]*$`)
	// Versions must not contain '_' (the file name separator) or spaces.
	versionPattern = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+~:-]*$`)
	// Architectures as opkg.conf spells them: x86_64, aarch64_cortex-a53, all.
	archPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)
)

// FileName is the conventional name of the package file:
// <Package>_<Version>_<Architecture>.ipk.
func (p *Package) FileName() string {
	name, _ := p.Control.Get("Package")
	version, _ := p.Control.Get("Version")
	arch, _ := p.Control.Get("Architecture")
	return fmt.Sprintf("%s_%s_%s.ipk", name, version, arch)
}

// InstalledSize is the sum of the data's regular file sizes in bytes, the
// figure OpenWrt's ipkg-build writes to Installed-Size.
func (p *Package) InstalledSize() int64 {
	var n int64
	for _, f := range p.Files {
		n += int64(len(f.Data))
	}
	return n
}

// Conffiles lists the paths of the files marked Conffile, sorted.
func (p *Package) Conffiles() []string {
	var out []string
	for _, f := range p.Files {
		if f.Conffile {
			out = append(out, f.Path)
		}
	}
	slices.Sort(out)
	return out
}

// validate rejects what opkg would reject or mis-install, with the field or
// path at fault in the message.
func (p *Package) validate() error {
	for _, req := range []struct {
		field   string
		pattern *regexp.Regexp
	}{{"Package", namePattern}, {"Version", versionPattern}, {"Architecture", archPattern}} {
		v, ok := p.Control.Get(req.field)
		if !ok || v == "" {
			return fmt.Errorf("control: %s is missing", req.field)
		}
		if !req.pattern.MatchString(v) {
			return fmt.Errorf("control: %s %q has characters opkg or the file name cannot carry", req.field, v)
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
	for name, text := range p.Scripts {
		if !slices.Contains(ScriptNames, name) {
			return fmt.Errorf("script %q: opkg only runs %s", name, strings.Join(ScriptNames, ", "))
		}
		if !bytes.HasPrefix(text, []byte("#!")) {
			return fmt.Errorf("script %s: must start with #! (opkg executes it)", name)
		}
	}
	return nil
}

// Build writes the package: a gzip-compressed outer tar holding
// ./debian-binary, ./data.tar.gz and ./control.tar.gz, all owned by 0:0 with
// mtime 0, so identical input gives identical bytes.
func (p *Package) Build() ([]byte, error) {
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("building %s: %w", p.FileName(), err)
	}
	control := p.Control
	control.Fields = slices.Clone(control.Fields)
	setAfter(&control, "Installed-Size", strconv.FormatInt(p.InstalledSize(), 10), "Architecture")

	data, err := tarGz(dataEntries(p.Files))
	if err != nil {
		return nil, fmt.Errorf("building %s: data.tar.gz: %w", p.FileName(), err)
	}
	ctl, err := tarGz(controlEntries(control, p.Conffiles(), p.Scripts))
	if err != nil {
		return nil, fmt.Errorf("building %s: control.tar.gz: %w", p.FileName(), err)
	}
	outer, err := tarGz([]entry{
		{name: MemberDebianBinary, mode: 0o644, data: []byte(DebianBinary)},
		{name: MemberData, mode: 0o644, data: data},
		{name: MemberControl, mode: 0o644, data: ctl},
	})
	if err != nil {
		return nil, fmt.Errorf("building %s: outer archive: %w", p.FileName(), err)
	}
	return outer, nil
}

// setAfter sets a field, placing it right after another when it is new, so
// Installed-Size sits where ipkg-build puts it.
func setAfter(c *Control, name, value, after string) {
	if _, ok := c.Get(name); ok {
		c.Set(name, value)
		return
	}
	for i, f := range c.Fields {
		if strings.EqualFold(f.Name, after) {
			c.Fields = slices.Insert(c.Fields, i+1, Field{Name: name, Value: value})
			return
		}
	}
	c.Fields = append(c.Fields, Field{Name: name, Value: value})
}

// entry is one tar member to write; a name ending in "/" is a directory.
type entry struct {
	name string
	mode int64
	data []byte
}

// dataEntries turns files into tar entries with every parent directory,
// ordered like GNU tar --sort=name: depth first, names compared per path
// component.
func dataEntries(files []File) []entry {
	dirs := map[string]bool{}
	out := []entry{{name: "./", mode: 0o755}}
	for _, f := range files {
		rel := strings.TrimPrefix(f.Path, "/")
		for d := path.Dir(rel); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			out = append(out, entry{name: "./" + d + "/", mode: 0o755})
		}
		out = append(out, entry{name: "./" + rel, mode: int64(f.Mode), data: f.Data})
	}
	slices.SortFunc(out, func(a, b entry) int { return comparePaths(a.name, b.name) })
	return out
}

// comparePaths orders "./a/" before "./a/b" and "./a/b" before "./a-c".
func comparePaths(a, b string) int {
	return slices.Compare(strings.Split(strings.TrimSuffix(a, "/"), "/"), strings.Split(strings.TrimSuffix(b, "/"), "/"))
}

func controlEntries(c Control, conffiles []string, scripts map[string][]byte) []entry {
	out := []entry{{name: "./", mode: 0o755}, {name: "./control", mode: 0o644, data: c.Bytes()}}
	if len(conffiles) > 0 {
		out = append(out, entry{name: "./conffiles", mode: 0o644, data: []byte(strings.Join(conffiles, "\n") + "\n")})
	}
	for name, text := range scripts {
		out = append(out, entry{name: "./" + name, mode: 0o755, data: text})
	}
	slices.SortFunc(out, func(a, b entry) int { return comparePaths(a.name, b.name) })
	return out
}

// tarGz writes entries as a GNU-format tar (what GNU tar, and so ipkg-build,
// writes) compressed with gzip.
func tarGz(entries []entry) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	zw.OS = gzipOSUnix
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{
			Name:     e.name,
			Mode:     e.mode,
			ModTime:  epoch,
			Typeflag: tar.TypeReg,
			Size:     int64(len(e.data)),
			Format:   tar.FormatGNU,
		}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("%s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("%s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
