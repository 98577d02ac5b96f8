package config

import (
	"fmt"
	"time"
)

// minLoginRefresh is the shortest proactive login interval accepted: short
// enough for the lab's tests, long enough that no setting hammers the
// account API.
const minLoginRefresh = 5 * time.Second

// validate applies the "0 means default" rules and checks what spans
// options; single values were checked when they were parsed.
func (p *parser) validate() {
	c := p.cfg
	if c.LoopGuard.MinActive == 0 {
		c.LoopGuard.MinActive = defaultMinActive
	}
	if c.LoopGuard.Ratio <= 0 {
		c.LoopGuard.Ratio = defaultRatio
	}

	if c.Auth.LoginBackoffMax < c.Auth.LoginBackoffMin {
		p.errorAt("auth", "login_backoff_max", "must not be less than login_backoff_min (%s)", c.Auth.LoginBackoffMin)
	}
	if r := c.Main.LoginRefresh; r > 0 && r < minLoginRefresh {
		p.errorAt("surflare", "login_refresh", "must be 0 (off) or at least %s: a login every few seconds looks like an attack to the account API (HTTP 429)", minLoginRefresh)
	}
	if c.Storm503.ActiveWindow > c.Storm503.Window {
		p.errorAt("storm503", "active_window", "must not be longer than window (%s)", c.Storm503.Window)
	}

	tunnel := false
	for _, pr := range c.Probes {
		tunnel = tunnel || pr.Kind.Tunnel()
	}
	if !tunnel {
		p.errorf(p.lines["@"+typeProbe], "", "", "no probe of kind search, cdn-trace or ip-echo: the tunnel could never be checked")
	}

	macs := map[string]int{}
	for i, b := range c.Bypass {
		if len(b.MAC) == 0 {
			continue
		}
		label := b.Section
		if label == "" {
			label = fmt.Sprintf("@bypass[%d]", i)
		}
		if j, dup := macs[b.MAC.String()]; dup {
			p.errorf(p.lineOf(label, "mac"), label, "mac", "%s is already bypassed by section at line %d", b.MAC, j)
			continue
		}
		macs[b.MAC.String()] = p.lineOf(label, "mac")
	}
}

// errorAt reports a problem of an option of a once-only section (given by
// its type) at the line where the file sets it, or else where the section
// starts.
func (p *parser) errorAt(typ, opt, format string, args ...any) {
	label := p.labels[typ]
	if label == "" {
		label = conventionalName(typ)
	}
	p.errorf(p.lineOf(label, opt), label, opt, format, args...)
}
