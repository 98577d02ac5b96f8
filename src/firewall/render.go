package firewall

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/nftables"
)

// Render returns the ruleset Apply would install for s, in nft syntax: the
// output of `surflare-watchdog firewall plan`, and a file `nft -f` accepts
// (the tests load it and compare the kernel's view with Apply's).
func Render(s Spec) (string, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# surflare-watchdog firewall plan: role=%s mode=%s ipv6=%s\n", s.Role, s.Mode, s.IPv6)
	for _, t := range buildTables(s) {
		b.WriteString("\n")
		b.WriteString(renderTable(t))
	}
	if s.Mode == ModeGlobal {
		b.WriteString("\n# Global mode: added to the vendor's table when it exists; the rules go first\n")
		b.WriteString("# in each of its prerouting and output base chains (names found at apply time).\n")
		for _, line := range strings.Split(strings.TrimRight(renderVendorExtension(s), "\n"), "\n") {
			b.WriteString("# " + line + "\n")
		}
	}
	return b.String(), nil
}

func renderTable(t tableSpec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s %s {\n", FamilyName(t.family), t.name)
	for _, c := range t.counters {
		fmt.Fprintf(&b, "\tcounter %s {\n\t}\n\n", c)
	}
	for _, s := range t.sets {
		b.WriteString(renderSet(s, "\t"))
		b.WriteString("\n")
	}
	for i, c := range t.chains {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "\tchain %s {\n", c.name)
		fmt.Fprintf(&b, "\t\ttype %s hook %s priority %d; policy %s;\n", c.typ, hookNames[c.hook], c.prio, policyName(c.policy))
		for _, r := range c.rules {
			fmt.Fprintf(&b, "\t\t%s comment %q\n", r.text, r.comment())
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func policyName(p nftables.ChainPolicy) string {
	if p == nftables.ChainPolicyDrop {
		return "drop"
	}
	return "accept"
}

func renderSet(s setSpec, indent string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%sset %s {\n", indent, s.name)
	fmt.Fprintf(&b, "%s\ttype %s\n", indent, s.kind.datatype().Name)
	var flags []string
	if s.interval {
		flags = append(flags, "interval")
	}
	if s.timeout > 0 {
		flags = append(flags, "timeout")
	}
	if len(flags) > 0 {
		fmt.Fprintf(&b, "%s\tflags %s\n", indent, strings.Join(flags, ","))
	}
	if s.timeout > 0 {
		fmt.Fprintf(&b, "%s\ttimeout %s\n", indent, nftDuration(s.timeout))
	}
	if elems := s.elementTexts(); len(elems) > 0 {
		const perLine = 6
		fmt.Fprintf(&b, "%s\telements = { ", indent)
		for i, e := range elems {
			if i > 0 {
				b.WriteString(",")
				if i%perLine == 0 {
					fmt.Fprintf(&b, "\n%s\t\t     ", indent)
				} else {
					b.WriteString(" ")
				}
			}
			b.WriteString(e)
		}
		b.WriteString(" }\n")
	}
	fmt.Fprintf(&b, "%s}\n", indent)
	return b.String()
}

func (s setSpec) elementTexts() []string {
	var out []string
	switch {
	case s.kind == kindEther:
		for _, m := range s.macs {
			out = append(out, m.String())
		}
	case s.interval:
		for _, r := range s.ranges {
			out = append(out, r.String())
		}
	default:
		for _, a := range s.addrs {
			out = append(out, a.String())
		}
	}
	return out
}

// nftDuration prints d the way nft reads it (1h, 90s, 1h30m).
func nftDuration(d time.Duration) string {
	var b strings.Builder
	for _, u := range []struct {
		d time.Duration
		s string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.d; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.s)
			d -= n * u.d
		}
	}
	if b.Len() == 0 {
		return "0s"
	}
	return b.String()
}
