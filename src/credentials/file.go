package credentials

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// File permissions of what this package writes: nobody but the owner (root)
// may read the password, or list and replace files next to it.
const (
	fileMode = 0o600
	dirMode  = 0o700
	// othersMask are the permission bits that must be clear on a password
	// file: any group or world access.
	othersMask = 0o077
	// maxFileSize bounds what is read: a password file is one short line.
	maxFileSize = 64 << 10
	// passwordKey starts the password line in the key form of the file.
	passwordKey = "password="
)

// fileHeader starts every file Store writes, so a root user who opens it
// knows what it is and why its mode matters.
const fileHeader = `# Surflare account password, used by surflare-watchdog for "surflare login".
# The e-mail is UCI surflare.main.username. Set with: surflare-watchdog credentials set
# Keep this file mode 0600, owned by root.
`

// errAbsent marks a source that does not exist: Load goes on to the next.
var errAbsent = errors.New("absent")

// readPasswordFile reads and parses one source. private adds the checks for
// a file we own: mode 0600 or stricter and owned by our effective uid.
// The file is opened without following a symlink and without blocking on a
// FIFO, and checked through the open descriptor, so what is checked is what
// is read.
func readPasswordFile(path string, private bool) (Secret, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Secret{}, errAbsent
	case errors.Is(err, syscall.ELOOP):
		return Secret{}, fmt.Errorf("%w: %s is a symbolic link; replace it with the file itself (surflare-watchdog credentials set)", ErrInsecure, path)
	case errors.Is(err, fs.ErrPermission):
		return Secret{}, fmt.Errorf("%w: %s: permission denied (run as root)", ErrUnreadable, path)
	case err != nil:
		return Secret{}, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Secret{}, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	if !fi.Mode().IsRegular() {
		return Secret{}, fmt.Errorf("%w: %s is not a regular file", ErrUnreadable, path)
	}
	if private {
		if err := checkPrivate(path, fi); err != nil {
			return Secret{}, err
		}
	}
	if fi.Size() > maxFileSize {
		return Secret{}, fmt.Errorf("%w: %s is %d bytes; a password file is one line", ErrUnreadable, path, fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return Secret{}, fmt.Errorf("%w: reading %s: %w", ErrUnreadable, path, err)
	}
	defer clear(data)
	return parsePassword(path, data)
}

// checkPrivate refuses a file that someone other than its owner can read or
// write, or that another user owns (they could read it or swap it).
func checkPrivate(path string, fi fs.FileInfo) error {
	if perm := fi.Mode().Perm(); perm&othersMask != 0 {
		return fmt.Errorf("%w: %s has mode %04o, readable or writable by group/others; fix with: chmod 600 %s",
			ErrInsecure, path, perm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if euid := os.Geteuid(); int(st.Uid) != euid {
			return fmt.Errorf("%w: %s is owned by uid %d, not by uid %d; fix with: chown %d %s",
				ErrInsecure, path, st.Uid, euid, euid, path)
		}
	}
	return nil
}

// parsePassword reads either form of the file (see the package comment).
// Errors name the file and the line, never its content.
func parsePassword(path string, data []byte) (Secret, error) {
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	keyed := false
	for _, l := range lines {
		if strings.HasPrefix(l, passwordKey) {
			keyed = true
		}
	}
	var pw string
	switch {
	case keyed:
		n := 0
		for i, l := range lines {
			t := strings.TrimLeft(l, " \t")
			switch {
			case t == "" || strings.HasPrefix(t, "#"):
			case strings.HasPrefix(l, passwordKey):
				pw, n = l[len(passwordKey):], n+1
			default:
				return Secret{}, fmt.Errorf("%w: %s:%d: expected a comment or password=..., found something else", ErrUnreadable, path, i+1)
			}
		}
		if n > 1 {
			return Secret{}, fmt.Errorf("%w: %s has %d password= lines; keep one", ErrUnreadable, path, n)
		}
	case len(lines) > 1:
		return Secret{}, fmt.Errorf("%w: %s has %d lines; write one line with the password, or password=PASSWORD", ErrUnreadable, path, len(lines))
	case len(lines) == 1:
		pw = lines[0]
	}
	if pw == "" {
		return Secret{}, fmt.Errorf("%w: %s holds an empty password", ErrNoCredentials, path)
	}
	if strings.IndexByte(pw, 0) >= 0 {
		return Secret{}, fmt.Errorf("%w: %s: the password contains a NUL byte", ErrUnreadable, path)
	}
	return NewSecret(pw), nil
}

// WriteFile replaces the password file at path atomically: the new content
// goes to a 0600 temporary file in the same directory, is fsynced, renamed
// over path, and the directory is fsynced, so a reader (or a power cut) sees
// the old file or the new one, never a partial or world-readable one. A
// missing directory is created with mode 0700; an existing directory that
// others can write to is refused. Concurrent writers do not interfere: the
// last rename wins.
func WriteFile(ctx context.Context, path string, pw Secret) error {
	if err := ValidatePassword(pw.Reveal()); err != nil {
		return err
	}
	data := []byte(fileHeader + passwordKey + pw.Reveal() + "\n")
	defer clear(data)
	if err := ensurePrivateDir(filepath.Dir(path)); err != nil {
		return err
	}
	return replaceFile(ctx, path, data, fileMode, -1, -1)
}

// replaceFile writes data to path by temporary file, fsync and rename, so
// that readers see the old content or the new one, never a mix. mode is
// set on the temporary file before any byte is written; uid/gid (-1: keep
// ours) are applied too, so a replaced file keeps its owner.
func replaceFile(ctx context.Context, path string, data []byte, mode fs.FileMode, uid, gid int) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	name := tmp.Name()
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(name)
		}
	}()
	// CreateTemp already uses 0600; set the mode explicitly anyway, before
	// the first byte, so no change there can widen it.
	if err := tmp.Chmod(mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if uid >= 0 {
		if err := tmp.Chown(uid, gid); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return syncDir(dir)
}

// ensurePrivateDir makes dir with mode 0700 if it is missing. An existing
// directory is left as it is (it may be /tmp or shared with other files)
// unless others can write to it without the sticky bit: then they could
// replace the password file, and it is refused.
func ensurePrivateDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, dirMode); err != nil {
			return fmt.Errorf("creating %s: %w", dir, err)
		}
		// MkdirAll's mode is reduced by the umask; make it exact.
		if err := os.Chmod(dir, dirMode); err != nil {
			return fmt.Errorf("creating %s: %w", dir, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("%w: directory %s has mode %04o, others can replace files in it; fix with: chmod 700 %s",
			ErrInsecure, dir, fi.Mode().Perm(), dir)
	}
	return nil
}

// syncDir makes a rename or unlink in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// removeFile deletes path durably; a missing file is not an error.
func removeFile(path string) (bool, error) {
	err := os.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("removing %s: %w", path, err)
	}
	return true, syncDir(filepath.Dir(path))
}
