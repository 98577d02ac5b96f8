package ipk

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// ErrMalformed marks a file opkg refuses with "pkg_init_from_file: Malformed
// package file <name>." (exit 255): the outer stream is not gzip, a member
// is missing, an inner archive is not gzip, or the control file has no
// Package field.
var ErrMalformed = errors.New("malformed package file")

// maxUnpacked bounds how much one archive may expand to, so a hostile or
// broken file cannot exhaust memory (our biggest package is ~20 MB).
const maxUnpacked = 512 << 20

// Member is one tar entry with its content.
type Member struct {
	Name     string
	Type     byte // tar.TypeReg, tar.TypeDir, ...
	Mode     int64
	UID, GID int
	Uname    string
	Gname    string
	ModTime  time.Time
	Format   tar.Format
	Linkname string
	Data     []byte
}

// Archive is an unpacked .ipk.
type Archive struct {
	// Outer holds the outer tar's members in file order.
	Outer []Member
	// ControlTar and DataTar hold the inner archives' entries in file order.
	ControlTar []Member
	DataTar    []Member
	Control    Control
	// Conffiles are the lines of ./conffiles (absolute paths).
	Conffiles []string
}

// stripDot removes the "./" prefix opkg ignores when matching names.
func stripDot(name string) string { return strings.TrimPrefix(name, "./") }

// Read unpacks an .ipk the way opkg-lede does: the outer stream must be
// gzip, control.tar.gz and data.tar.gz are found by name wherever they are,
// other members are kept but not interpreted. Anything opkg would call
// malformed is reported as ErrMalformed with the reason.
func Read(b []byte) (*Archive, error) {
	outer, err := untarGz(b)
	if err != nil {
		return nil, fmt.Errorf("%w: outer archive: %w", ErrMalformed, err)
	}
	a := &Archive{Outer: outer}
	ctl, ok := a.member("control.tar.gz")
	if !ok {
		return nil, fmt.Errorf("%w: no control.tar.gz member", ErrMalformed)
	}
	if a.ControlTar, err = untarGz(ctl.Data); err != nil {
		return nil, fmt.Errorf("%w: control.tar.gz: %w", ErrMalformed, err)
	}
	data, ok := a.member("data.tar.gz")
	if !ok {
		return nil, fmt.Errorf("%w: no data.tar.gz member", ErrMalformed)
	}
	if a.DataTar, err = untarGz(data.Data); err != nil {
		return nil, fmt.Errorf("%w: data.tar.gz: %w", ErrMalformed, err)
	}
	control, ok := find(a.ControlTar, "control")
	if !ok {
		return nil, fmt.Errorf("%w: control.tar.gz has no control file", ErrMalformed)
	}
	if a.Control, err = ParseControl(control.Data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if v, ok := a.Control.Get("Package"); !ok || v == "" {
		return nil, fmt.Errorf("%w: control has no Package field", ErrMalformed)
	}
	if cf, ok := find(a.ControlTar, "conffiles"); ok {
		sc := bufio.NewScanner(bytes.NewReader(cf.Data))
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" {
				a.Conffiles = append(a.Conffiles, line)
			}
		}
	}
	return a, nil
}

// member finds an outer member by name, ignoring a leading "./".
func (a *Archive) member(name string) (Member, bool) { return find(a.Outer, name) }

// ControlFile returns an entry of control.tar.gz ("control", "postinst", ...).
func (a *Archive) ControlFile(name string) (Member, bool) { return find(a.ControlTar, name) }

// DataFile returns the data entry installed at an absolute target path.
func (a *Archive) DataFile(target string) (Member, bool) {
	return find(a.DataTar, strings.TrimPrefix(target, "/"))
}

func find(members []Member, name string) (Member, bool) {
	for _, m := range members {
		if strings.TrimSuffix(stripDot(m.Name), "/") == name {
			return m, true
		}
	}
	return Member{}, false
}

// untarGz reads a gzip-compressed tar completely, within maxUnpacked.
func untarGz(b []byte) ([]Member, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %w", err)
	}
	lr := &io.LimitedReader{R: zr, N: maxUnpacked + 1}
	tr := tar.NewReader(lr)
	var out []Member
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("tar entry %d: %w", len(out)+1, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("tar entry %q: %w", h.Name, err)
		}
		if lr.N <= 0 {
			return nil, fmt.Errorf("unpacks to more than %d bytes", maxUnpacked)
		}
		out = append(out, Member{
			Name: h.Name, Type: h.Typeflag, Mode: h.Mode, UID: h.Uid, GID: h.Gid,
			Uname: h.Uname, Gname: h.Gname, ModTime: h.ModTime, Format: h.Format,
			Linkname: h.Linkname, Data: data,
		})
	}
	if len(out) == 0 {
		return nil, errors.New("empty tar")
	}
	return out, nil
}
