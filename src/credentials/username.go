package credentials

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"surflare-watchdog/src/uci"
)

// UCI names of the username option: `config surflare 'main'` /
// `option username`, as package config reads them.
const (
	mainSectionType = "surflare"
	mainSectionName = "main"
	usernameOption  = "username"
	// newConfigMode is the mode of a config file created from nothing; it
	// holds no secret (OpenWrt's /etc/config files are 0644 too).
	newConfigMode = 0o644
)

// logger is the subsystem logger, looked up at each use: one taken at
// package init would keep the default handler from before the program
// installed its own (lines would lose their level and attributes).
func logger() *slog.Logger { return slog.Default().With("subsystem", "credentials") }

// ReadUsername returns main.username from a UCI config file: "" when the
// file, the section or the option is absent. Syntax errors elsewhere in the
// file are skipped, as `uci -S` does, so status still shows the username
// of a file the daemon would refuse.
func ReadUsername(configFile string) (string, error) {
	data, err := os.ReadFile(configFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", configFile, err)
	}
	c, _ := uci.ParseNonStrict(filepath.Base(configFile), data)
	v, _ := mainSection(c).Get(usernameOption)
	return v, nil
}

// mainSection is the first `config surflare` section, the one package
// config reads as Main (nil if none).
func mainSection(c *uci.Config) *uci.Section {
	if s := c.SectionsOfType(mainSectionType); len(s) > 0 {
		return s[0]
	}
	return nil
}

// SetUsername sets main.username in a UCI config file and reports whether
// the file changed. Every other byte of the file stays as it was — comments,
// quoting, indentation, other sections — because only the option's line is
// replaced (or one line inserted); the result is checked by parsing it and
// comparing with the file uci itself would produce. Only if that check
// fails (an exotic layout: the option shares a line, a line continuation)
// is the file written in uci's canonical form instead, as `uci commit`
// would. The file is locked like libuci locks it, and replaced atomically
// with its mode and owner kept. Pending changes in /tmp/.uci are left
// pending. A missing file is created with just the main section.
func SetUsername(configFile, username string) (changed bool, err error) {
	if err := ValidateUsername(username); err != nil {
		return false, err
	}
	f, err := os.OpenFile(configFile, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		c := &uci.Config{Name: filepath.Base(configFile)}
		if err := setMainUsername(c, username); err != nil {
			return false, fmt.Errorf("%s: %w", configFile, err)
		}
		return true, replaceFile(context.Background(), configFile, c.Bytes(), newConfigMode, -1, -1)
	}
	if err != nil {
		return false, fmt.Errorf("opening %s: %w", configFile, err)
	}
	defer f.Close()
	lockFile(f)
	data, err := io.ReadAll(f)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", configFile, err)
	}
	out, err := editUsername(configFile, data, username)
	if err != nil || bytes.Equal(out, data) {
		return false, err
	}
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", configFile, err)
	}
	uid, gid := -1, -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		uid, gid = int(st.Uid), int(st.Gid)
	}
	return true, replaceFile(context.Background(), configFile, out, fi.Mode().Perm(), uid, gid)
}

// editUsername returns the file with main.username set.
func editUsername(path string, data []byte, username string) ([]byte, error) {
	name := filepath.Base(path)
	orig, err := uci.Parse(name, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (fix the file first)", path, err)
	}
	if v, ok := mainSection(orig).Get(usernameOption); ok && v == username {
		if o := mainSection(orig).Option(usernameOption); !o.List {
			return data, nil
		}
	}
	want, _ := uci.Parse(name, data)
	if err := setMainUsername(want, username); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	canonical := want.Bytes()
	if out, ok := spliceUsername(orig, data, username); ok {
		if got, err := uci.Parse(name, out); err == nil && bytes.Equal(got.Bytes(), canonical) {
			return out, nil
		}
	}
	logger().Warn("config file rewritten in uci's canonical form: its layout did not allow a one-line edit", "file", path)
	return canonical, nil
}

// setMainUsername sets the option in the parsed config, the way `uci set
// surflare.main.username=...` would.
func setMainUsername(c *uci.Config, username string) error {
	s := mainSection(c)
	if s == nil {
		if other := c.Section(mainSectionName); other != nil {
			return fmt.Errorf("section %q has type %q, not %q", mainSectionName, other.Type, mainSectionType)
		}
		s = &uci.Section{Name: mainSectionName, Type: mainSectionType}
		c.Sections = append(c.Sections, s)
	}
	if o := s.Option(usernameOption); o != nil {
		o.Values, o.List = []string{username}, false
		return nil
	}
	s.Options = append(s.Options, &uci.Option{Name: usernameOption, Values: []string{username}})
	return nil
}

// spliceUsername edits the text: replace the option's line, or insert one
// after the section's last option, or append the section. ok is false
// when the layout does not allow it.
func spliceUsername(c *uci.Config, data []byte, username string) ([]byte, bool) {
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	stmt := "option " + usernameOption + " " + uciQuote(username)
	s := mainSection(c)
	if s == nil {
		var b strings.Builder
		b.WriteString(string(data))
		if len(data) > 0 && data[len(data)-1] != '\n' {
			b.WriteString("\n")
		}
		b.WriteString("\nconfig " + mainSectionType + " '" + mainSectionName + "'\n\t" + stmt + "\n")
		return []byte(b.String()), true
	}
	if o := s.Option(usernameOption); o != nil {
		i := o.Line - 1
		if i < 0 || i >= len(lines) {
			return nil, false
		}
		body := strings.TrimRight(lines[i], "\r\n")
		end, ok := statementEnd(body)
		if !ok {
			return nil, false
		}
		indent := body[:len(body)-len(strings.TrimLeft(body, " \t"))]
		// Keep what follows the statement (spaces, a # comment) and the
		// line ending.
		lines[i] = indent + stmt + lines[i][end:]
		return []byte(strings.Join(lines, "")), true
	}
	at, indent := s.Line, "\t"
	for _, o := range s.Options {
		if o.Line > at {
			at = o.Line
		}
	}
	if at < 1 || at > len(lines) {
		return nil, false
	}
	if at > s.Line {
		prev := lines[at-1]
		indent = prev[:len(prev)-len(strings.TrimLeft(prev, " \t"))]
	}
	if !strings.HasSuffix(lines[at-1], "\n") {
		lines[at-1] += "\n"
	}
	ins := append([]string{indent + stmt + "\n"}, lines[at:]...)
	lines = append(lines[:at], ins...)
	return []byte(strings.Join(lines, "")), true
}

// statementEnd returns where the `option username` statement on a line
// ends: the shortest prefix, cut at a space, tab or '#', that already
// gives the same value. ok is false when the line holds anything else (a
// second statement, a list).
func statementEnd(body string) (int, bool) {
	value, ok := usernameOnLine(body)
	if !ok {
		return 0, false
	}
	for i := 1; i < len(body); i++ {
		if c := body[i]; c != ' ' && c != '\t' && c != '#' {
			continue
		}
		if v, ok := usernameOnLine(body[:i]); ok && v == value {
			return i, true
		}
	}
	return len(body), true
}

// usernameOnLine parses a line on its own and returns the username it sets
// when the line holds exactly that one option.
func usernameOnLine(line string) (string, bool) {
	c, err := uci.Parse("x", []byte("config x\n"+line+"\n"))
	if err != nil || len(c.Sections) != 1 {
		return "", false
	}
	opts := c.Sections[0].Options
	if len(opts) != 1 || opts[0].Name != usernameOption || opts[0].List {
		return "", false
	}
	return opts[0].Value(), true
}

// uciQuote single-quotes a value as uci export does.
func uciQuote(v string) string {
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

// lockFile takes libuci's exclusive advisory lock on the config file,
// released when the file is closed.
func lockFile(f *os.File) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}
