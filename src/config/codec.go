package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// value is one typed field seen through its UCI text. Each kind of field
// (duration, address list, enum...) has one implementation, so parsing,
// writing and JSON agree by construction.
type value interface {
	// set parses the option's values (one for `option`, one or more for
	// `list`) into the field. The error says what is wrong with the text,
	// without the location: the caller adds FILE:LINE: section.option.
	set(vals []string) error
	// text is what Format writes: nil writes nothing.
	text() []string
	// json is the field as MarshalJSON shows it.
	json() any
}

// option binds a UCI option name to a typed field.
type option struct {
	name string
	list bool // written as `list`; a single `option` is accepted as a one-item list
	v    value
}

// ---- booleans

type boolValue struct{ p *bool }

func boolean(name string, p *bool) option { return option{name: name, v: boolValue{p}} }

func (b boolValue) set(v []string) error {
	switch strings.ToLower(v[0]) {
	case "1", "yes", "on", "true", "enabled":
		*b.p = true
	case "0", "no", "off", "false", "disabled":
		*b.p = false
	default:
		return fmt.Errorf("%q is not a boolean (use 1 or 0)", v[0])
	}
	return nil
}

func (b boolValue) text() []string {
	if *b.p {
		return []string{"1"}
	}
	return []string{"0"}
}

func (b boolValue) json() any { return *b.p }

// ---- integers

type integerType interface{ ~int | ~int64 | ~uint16 }

type intValue[T integerType] struct {
	p        *T
	min, max int64
}

func integer[T integerType](name string, p *T, min, max int64) option {
	return option{name: name, v: intValue[T]{p, min, max}}
}

func (n intValue[T]) set(v []string) error {
	x, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", v[0])
	}
	if err := inRange(x, n.min, n.max, strconv.FormatInt); err != nil {
		return err
	}
	if int64(T(x)) != x { // beyond int on a 32-bit router
		return fmt.Errorf("%d is too large for this system", x)
	}
	*n.p = T(x)
	return nil
}

func (n intValue[T]) text() []string { return []string{strconv.FormatInt(int64(*n.p), 10)} }
func (n intValue[T]) json() any      { return int64(*n.p) }

// inRange reports x outside [min, max] in the option's own unit.
func inRange(x, min, max int64, show func(int64, int) string) error {
	switch {
	case x < min && max == math.MaxInt64:
		return fmt.Errorf("%s is too small: must be at least %s", show(x, 10), show(min, 10))
	case x > max && min == math.MinInt64:
		return fmt.Errorf("%s is too large: must be at most %s", show(x, 10), show(max, 10))
	case x < min || x > max:
		return fmt.Errorf("%s is out of range: must be between %s and %s", show(x, 10), show(min, 10), show(max, 10))
	}
	return nil
}

// ---- durations: a whole number in the option's unit, or a Go duration
// ("90s", "1h30m") or a number of days ("7d").

type durationValue struct {
	p        *time.Duration
	unit     time.Duration
	min, max time.Duration
}

func seconds(name string, p *time.Duration, min, max time.Duration) option {
	return option{name: name, v: durationValue{p, time.Second, min, max}}
}

func minutes(name string, p *time.Duration, min, max time.Duration) option {
	return option{name: name, v: durationValue{p, time.Minute, min, max}}
}

func (d durationValue) set(v []string) error {
	x, ok := parseDuration(v[0], d.unit)
	if !ok {
		return fmt.Errorf("%q is not a number of %s", v[0], unitName(d.unit))
	}
	show := func(n int64, _ int) string { return time.Duration(n).String() }
	if err := inRange(int64(x), int64(d.min), int64(d.max), show); err != nil {
		return err
	}
	*d.p = x
	return nil
}

func (d durationValue) text() []string { return []string{formatDuration(*d.p, d.unit)} }
func (d durationValue) json() any      { return d.p.String() }

func parseDuration(s string, unit time.Duration) (time.Duration, bool) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n > math.MaxInt64/int64(unit) || n < math.MinInt64/int64(unit) {
			return 0, false
		}
		return time.Duration(n) * unit, true
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > math.MaxInt64/int64(24*time.Hour) {
			return 0, false
		}
		return time.Duration(n) * 24 * time.Hour, true
	}
	x, err := time.ParseDuration(s)
	return x, err == nil
}

// formatDuration writes d as a whole number of unit when it is one (what
// LuCI forms and the default file use), else as a Go duration.
func formatDuration(d, unit time.Duration) string {
	if d%unit == 0 {
		return strconv.FormatInt(int64(d/unit), 10)
	}
	return d.String()
}

func unitName(unit time.Duration) string {
	if unit == time.Minute {
		return "minutes"
	}
	return "seconds"
}

// ---- sizes in bytes: 2097152, 2048K, 2M.

type sizeValue struct {
	p        *int64
	min, max int64
}

func size(name string, p *int64, min, max int64) option {
	return option{name: name, v: sizeValue{p, min, max}}
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"", 1}}

func (s sizeValue) set(v []string) error {
	x, ok := parseSize(v[0])
	if !ok {
		return fmt.Errorf("%q is not a size (bytes, or a number with K, M or G)", v[0])
	}
	if err := inRange(x, s.min, s.max, func(n int64, _ int) string { return formatSize(n) }); err != nil {
		return err
	}
	*s.p = x
	return nil
}

func (s sizeValue) text() []string { return []string{formatSize(*s.p)} }
func (s sizeValue) json() any      { return *s.p }

func parseSize(s string) (int64, bool) {
	t := strings.TrimSuffix(strings.ToUpper(s), "B")
	for _, u := range sizeUnits {
		num, ok := strings.CutSuffix(t, u.suffix)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n < 0 || n > math.MaxInt64/u.mult {
			return 0, false
		}
		return n * u.mult, true
	}
	return 0, false
}

func formatSize(n int64) string {
	for _, u := range sizeUnits {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// ---- strings, with an optional check.

type stringValue struct {
	p     *string
	check func(string) error
}

func str(name string, p *string, check func(string) error) option {
	return option{name: name, v: stringValue{p, check}}
}

func (s stringValue) set(v []string) error {
	if s.check != nil {
		if err := s.check(v[0]); err != nil {
			return err
		}
	}
	*s.p = v[0]
	return nil
}

// text writes nothing for "": UCI drops empty options, so "" means "unset".
func (s stringValue) text() []string {
	if *s.p == "" {
		return nil
	}
	return []string{*s.p}
}

func (s stringValue) json() any { return *s.p }

// ---- enums.

type enumValue[T ~string] struct {
	p       *T
	allowed []T
}

func choice[T ~string](name string, p *T, allowed ...T) option {
	return option{name: name, v: enumValue[T]{p, allowed}}
}

func (e enumValue[T]) set(v []string) error {
	for _, a := range e.allowed {
		if string(a) == v[0] {
			*e.p = a
			return nil
		}
	}
	names := make([]string, len(e.allowed))
	for i, a := range e.allowed {
		names[i] = string(a)
	}
	return fmt.Errorf("%q is not one of %s", v[0], strings.Join(names, ", "))
}

func (e enumValue[T]) text() []string { return []string{string(*e.p)} }
func (e enumValue[T]) json() any      { return string(*e.p) }

// ---- lists of any parsable item. Empty items are skipped, so `list x ''`
// is how a file says "empty list" where the default is not empty.

type listValue[T any] struct {
	p        *[]T
	parse    func(string) (T, error)
	show     func(T) string
	nonEmpty bool
}

func list[T any](name string, p *[]T, parse func(string) (T, error), show func(T) string, nonEmpty bool) option {
	return option{name: name, list: true, v: listValue[T]{p, parse, show, nonEmpty}}
}

func (l listValue[T]) set(v []string) error {
	var out []T
	var errs []error
	seen := map[string]bool{}
	for _, s := range v {
		if s == "" {
			continue
		}
		x, err := l.parse(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if key := l.show(x); seen[key] {
			errs = append(errs, fmt.Errorf("%q is listed twice", s))
			continue
		} else {
			seen[key] = true
		}
		out = append(out, x)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if l.nonEmpty && len(out) == 0 {
		return errors.New("must not be empty")
	}
	*l.p = out
	return nil
}

func (l listValue[T]) text() []string {
	if len(*l.p) == 0 {
		return []string{""}
	}
	return l.strings()
}

func (l listValue[T]) json() any {
	if s := l.strings(); s != nil {
		return s
	}
	return []string{}
}

func (l listValue[T]) strings() []string {
	var out []string
	for _, x := range *l.p {
		out = append(out, l.show(x))
	}
	return out
}

func texts(name string, p *[]string, nonEmpty bool) option {
	return list(name, p, func(s string) (string, error) { return s, nil }, func(s string) string { return s }, nonEmpty)
}

func addrList(name string, p *[]netip.Addr) option {
	return list(name, p, parseAddr, netip.Addr.String, false)
}

func prefixList(name string, p *[]netip.Prefix) option {
	return list(name, p, parsePrefix, netip.Prefix.String, false)
}

func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	return a, nil
}

// parsePrefix accepts "10.0.0.0/8" or a bare address (a single host).
// Host bits are cleared: the firewall's interval sets need network addresses.
func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := parseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an address or prefix", s)
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an address or prefix", s)
	}
	return p.Masked(), nil
}

// ---- one address; unset stays the zero netip.Addr.

type addrValue struct{ p *netip.Addr }

func address(name string, p *netip.Addr) option { return option{name: name, v: addrValue{p}} }

func (a addrValue) set(v []string) error {
	x, err := parseAddr(v[0])
	if err != nil {
		return err
	}
	*a.p = x
	return nil
}

func (a addrValue) text() []string {
	if !a.p.IsValid() {
		return nil
	}
	return []string{a.p.String()}
}

func (a addrValue) json() any {
	if !a.p.IsValid() {
		return ""
	}
	return a.p.String()
}

// ---- MAC addresses (EUI-48, as in /tmp/dhcp.leases).

type macValue struct{ p *net.HardwareAddr }

func mac(name string, p *net.HardwareAddr) option { return option{name: name, v: macValue{p}} }

func (m macValue) set(v []string) error {
	x, err := net.ParseMAC(v[0])
	if err != nil || len(x) != 6 {
		return fmt.Errorf("%q is not a MAC address (like 00:11:22:33:44:55)", v[0])
	}
	*m.p = x
	return nil
}

func (m macValue) text() []string {
	if len(*m.p) == 0 {
		return nil
	}
	return []string{m.p.String()}
}

func (m macValue) json() any { return m.p.String() }

// ---- regular expressions with required named groups.

type regexpValue struct {
	p      **regexp.Regexp
	groups []string
}

func pattern(name string, p **regexp.Regexp, groups ...string) option {
	return option{name: name, v: regexpValue{p, groups}}
}

func (r regexpValue) set(v []string) error {
	re, err := regexp.Compile(v[0])
	if err != nil {
		return fmt.Errorf("not a valid regular expression: %v", err)
	}
	for _, g := range r.groups {
		if re.SubexpIndex(g) < 0 {
			return fmt.Errorf("the pattern needs a named group (?P<%s>...)", g)
		}
	}
	*r.p = re
	return nil
}

func (r regexpValue) text() []string {
	if *r.p == nil {
		return nil
	}
	return []string{(*r.p).String()}
}

func (r regexpValue) json() any {
	if *r.p == nil {
		return ""
	}
	return (*r.p).String()
}

// ---- checks for strings.

func notEmpty(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("must not be empty")
	}
	return nil
}

func absPath(s string) error {
	if !filepath.IsAbs(s) {
		return fmt.Errorf("%q is not an absolute path", s)
	}
	return nil
}

func httpURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http:// or https:// URL", s)
	}
	return nil
}

// countryCode is an ISO 3166 alpha-2 code as probes report it ("US").
func countryCode(s string) error {
	if len(s) != 2 || strings.ToUpper(s) != s || s[0] < 'A' || s[0] > 'Z' || s[1] < 'A' || s[1] > 'Z' {
		return fmt.Errorf("%q is not a two-letter country code (like US)", s)
	}
	return nil
}

// ifName is a Linux interface name.
func ifName(s string) error {
	if len(s) == 0 || len(s) > 15 || strings.ContainsAny(s, "/ \t:") {
		return fmt.Errorf("%q is not a network interface name", s)
	}
	return nil
}

// optionalIfName allows "" (auto-detect).
func optionalIfName(s string) error {
	if s == "" {
		return nil
	}
	return ifName(s)
}

// procComm is a process name as /proc/PID/comm shows it (at most 15 bytes).
func procComm(s string) error {
	if s == "" || len(s) > 15 || strings.Contains(s, "/") {
		return fmt.Errorf("%q is not a process name (1 to 15 characters, as in /proc/PID/comm)", s)
	}
	return nil
}
