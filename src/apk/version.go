package apk

import "strings"

// ValidVersion reports whether apk accepts v as a package version
// (apk_version_validate): digits separated by dots, an optional letter,
// any number of _alpha/_beta/_pre/_rc/_cvs/_svn/_git/_hg/_p suffixes each
// with an optional number, an optional ~hexhash, and an optional -rN
// release. "0.1.0-r272" is valid; "0.1.0-272", "1.0-beta" and "v1.0" are
// not, and `apk mkpkg` refuses them ("info field 'version' has invalid
// value").
func ValidVersion(v string) bool {
	const (
		digit = iota
		letter
		suffix
		suffixNo
		hash
		revision
	)
	digits := func() bool {
		n := 0
		for n < len(v) && v[n] >= '0' && v[n] <= '9' {
			n++
		}
		v = v[n:]
		return n > 0
	}
	if !digits() {
		return false
	}
	state := digit
	for len(v) > 0 {
		switch c := v[0]; {
		case c >= 'a' && c <= 'z':
			if state > digit {
				return false
			}
			v, state = v[1:], letter
		case c == '.' || c >= '0' && c <= '9':
			if c == '.' {
				if state > digit {
					return false
				}
				v = v[1:]
			}
			switch state {
			case digit:
			case suffix:
				state = suffixNo
			default:
				return false
			}
			if !digits() {
				return false
			}
		case c == '_':
			if state > suffixNo {
				return false
			}
			n := 1
			for n < len(v) && v[n] >= 'a' && v[n] <= 'z' {
				n++
			}
			if !validSuffix(v[1:n]) {
				return false
			}
			v, state = v[n:], suffix
		case c == '~':
			if state >= hash {
				return false
			}
			n := 1
			for n < len(v) && strings.IndexByte("0123456789abcdef", v[n]) >= 0 {
				n++
			}
			if n == 1 {
				return false
			}
			v, state = v[n:], hash
		case c == '-':
			if state >= revision || !strings.HasPrefix(v, "-r") {
				return false
			}
			v, state = v[2:], revision
			if !digits() {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func validSuffix(s string) bool {
	switch s {
	case "alpha", "beta", "pre", "rc", "cvs", "svn", "git", "hg", "p":
		return true
	}
	return false
}

// ValidName reports whether apk accepts name as a package name: it starts
// with a letter or digit and holds only letters, digits and + - . _.
func ValidName(name string) bool {
	if name == "" || !isAlnum(name[0]) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && strings.IndexByte("+-._", c) < 0 {
			return false
		}
	}
	return true
}

// validDependency is a plain package name as a dependency: we ship no
// version constraints, so a constraint here is a mistake, not a feature.
func validDependency(name string) bool { return ValidName(name) }

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
