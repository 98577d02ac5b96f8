// Package preflight finds the local causes that stop the tunnel before any
// node is tried: no vendor client, no credentials, no WAN, a kernel without
// the modules the firewall needs, a settings file that does not parse.
//
// Without it, a router without /usr/bin/surflare tried all six nodes in ten
// seconds, marked every one failed and sat out the reconnect rate limit,
// while the UI showed "login ok" in green: a local cause blamed on the
// nodes. The engine asks Run before it connects and on every `check`; a
// Blocker means "do not try nodes, tell the person this instead". Every
// finding says what is wrong and what to do in plain words; codes and paths
// go into Detail.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"surflare-watchdog/src/credentials"
)

// Severity says what a finding stops.
type Severity string

const (
	// Blocker: the tunnel cannot come up until the person acts; trying
	// nodes would only mark healthy nodes failed.
	Blocker Severity = "blocker"
	// Warning: the tunnel works, a feature is degraded.
	Warning Severity = "warning"
)

// Check names, stable for the API, ubus and tests.
const (
	CheckConfig      = "config"
	CheckVendor      = "vendor_client"
	CheckCredentials = "credentials"
	CheckWAN         = "wan"
	CheckKernel      = "kernel_modules"
	CheckCgroup      = "cgroup2"
)

// Finding is one thing wrong, for a person.
type Finding struct {
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	Why      string   `json:"why"`              // what is wrong, in plain words
	Fix      string   `json:"fix"`              // what to do
	Detail   string   `json:"detail,omitempty"` // codes, paths, raw errors
}

// Report is the result of one run.
type Report struct {
	At       time.Time `json:"at"`
	Findings []Finding `json:"findings,omitempty"`
}

// Blocker returns the first finding that stops the tunnel, in the order the
// checks run (settings, client, credentials, WAN, kernel): the one to fix
// first.
func (r Report) Blocker() (Finding, bool) {
	for _, f := range r.Findings {
		if f.Severity == Blocker {
			return f, true
		}
	}
	return Finding{}, false
}

// OK reports whether nothing blocks the tunnel.
func (r Report) OK() bool { _, b := r.Blocker(); return !b }

// Why is the one line a person reads first: the blocker's cause and remedy,
// or "" when nothing blocks.
func (r Report) Why() string {
	f, ok := r.Blocker()
	if !ok {
		return ""
	}
	return f.Why + " — " + f.Fix
}

// Input is what the checks look at.
type Input struct {
	ConfigPath string
	ConfigErr  error  // the settings file's parse/validation error, nil when it loaded
	VendorBin  string // the vendor CLI (config paths.surflare_bin)
	Router     bool   // role router: the LAN tables need the tproxy/socket modules
	// Credentials is where the login comes from; nil skips the check (the
	// caller has a login that needs no password, e.g. a cached token).
	Credentials *credentials.Options
}

// Probes are the host's answers; the zero value asks the real host.
type Probes struct {
	Stat     func(string) (fs.FileInfo, error)
	ReadFile func(string) ([]byte, error)
	// WAN returns the WAN device, or an error when there is no default
	// route (route.Handle.WANDevice).
	WAN func(context.Context) (string, error)
	// Release is the kernel release (uname -r) for modules.builtin.
	Release string
	Now     func() time.Time
}

func (p Probes) withDefaults() Probes {
	if p.Stat == nil {
		p.Stat = os.Stat
	}
	if p.ReadFile == nil {
		p.ReadFile = os.ReadFile
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.Release == "" {
		if b, err := p.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
			p.Release = strings.TrimSpace(string(b))
		}
	}
	return p
}

// Run runs every check and returns what it found. It never fails: a check
// that cannot decide says nothing rather than guess.
func Run(ctx context.Context, in Input, p Probes) Report {
	p = p.withDefaults()
	r := Report{At: p.Now()}
	add := func(f *Finding) {
		if f != nil {
			r.Findings = append(r.Findings, *f)
		}
	}
	add(checkConfig(in))
	add(checkVendor(in, p))
	add(checkCredentials(in))
	add(checkWAN(ctx, p))
	add(checkKernel(in, p))
	add(checkCgroup(p))
	return r
}

func checkConfig(in Input) *Finding {
	if in.ConfigErr == nil {
		return nil
	}
	path := in.ConfigPath
	if path == "" {
		path = "the settings file"
	}
	return &Finding{
		Check: CheckConfig, Severity: Blocker,
		Why:    fmt.Sprintf("The settings in %s have errors", path),
		Fix:    "run `surflare-watchdog config check` and correct the lines it names",
		Detail: in.ConfigErr.Error(),
	}
}

func checkVendor(in Input, p Probes) *Finding {
	bin := in.VendorBin
	if bin == "" {
		return nil
	}
	fi, err := p.Stat(bin)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &Finding{
			Check: CheckVendor, Severity: Blocker,
			Why:    "Surflare client not found at " + bin,
			Fix:    "install the Surflare client first (see docs/install.md), or set paths.surflare_bin",
			Detail: err.Error(),
		}
	case err != nil:
		return &Finding{
			Check: CheckVendor, Severity: Blocker,
			Why:    "The Surflare client at " + bin + " cannot be read",
			Fix:    "check the file and its permissions",
			Detail: err.Error(),
		}
	case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
		return &Finding{
			Check: CheckVendor, Severity: Blocker,
			Why:    "The Surflare client at " + bin + " is not a program that can run",
			Fix:    "reinstall the Surflare client, or run `chmod +x " + bin + "`",
			Detail: "mode " + fi.Mode().String(),
		}
	}
	return nil
}

func checkCredentials(in Input) *Finding {
	if in.Credentials == nil {
		return nil
	}
	st := credentials.Status(*in.Credentials)
	if st.Present && st.Problem == "" {
		return nil
	}
	f := &Finding{
		Check: CheckCredentials, Severity: Blocker,
		Why:    "No Surflare account is set up on this router",
		Fix:    "enter your Surflare e-mail and password in LuCI (Services → Surflare → Settings) or run `surflare-watchdog credentials set --username EMAIL`",
		Detail: st.Problem,
	}
	if st.Present {
		f.Why = "The Surflare account is incomplete"
	}
	return f
}

func checkWAN(ctx context.Context, p Probes) *Finding {
	if p.WAN == nil {
		return nil
	}
	if _, err := p.WAN(ctx); err != nil {
		return &Finding{
			Check: CheckWAN, Severity: Blocker,
			Why:    "The router has no Internet connection (no default route on the WAN)",
			Fix:    "check the modem and the WAN cable; the tunnel comes back by itself when the WAN does",
			Detail: err.Error(),
		}
	}
	return nil
}

// kernelNeeds are the modules the LAN tables use, with the OpenWrt package
// that brings each.
var kernelNeeds = []struct{ module, pkg string }{
	{"nft_tproxy", "kmod-nft-tproxy"},
	{"nft_socket", "kmod-nft-socket"},
	{"nf_conntrack_netlink", "kmod-nf-conntrack-netlink"},
}

// checkKernel reports a module only when the kernel says it has modules and
// this one is neither loaded nor built in: without modules.builtin a
// monolithic kernel cannot be told apart from a missing module.
func checkKernel(in Input, p Probes) *Finding {
	if !in.Router || p.Release == "" {
		return nil
	}
	builtin, err := p.ReadFile("/lib/modules/" + p.Release + "/modules.builtin")
	if err != nil {
		return nil
	}
	loaded, _ := p.ReadFile("/proc/modules")
	have := map[string]bool{}
	for _, l := range strings.Split(string(builtin), "\n") {
		if i := strings.LastIndexByte(l, '/'); i >= 0 {
			have[strings.TrimSuffix(l[i+1:], ".ko")] = true
		}
	}
	for _, l := range strings.Split(string(loaded), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			have[f[0]] = true
		}
	}
	var missing, pkgs []string
	for _, n := range kernelNeeds {
		if !have[n.module] {
			if _, err := p.Stat("/lib/modules/" + p.Release + "/" + n.module + ".ko"); err == nil {
				continue // installed, loaded on first use
			}
			missing, pkgs = append(missing, n.module), append(pkgs, n.pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &Finding{
		Check: CheckKernel, Severity: Blocker,
		Why:    "The router's kernel lacks parts the kill switch and LAN redirect need",
		Fix:    "run `opkg install " + strings.Join(pkgs, " ") + "` and restart the watchdog",
		Detail: "missing modules: " + strings.Join(missing, ", "),
	}
}

func checkCgroup(p Probes) *Finding {
	mi, err := p.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	for _, l := range strings.Split(string(mi), "\n") {
		if i := strings.Index(l, " - "); i >= 0 && strings.HasPrefix(l[i+3:], "cgroup2 ") {
			return nil
		}
	}
	return &Finding{
		Check: CheckCgroup, Severity: Warning,
		Why:    "Long downloads are not protected during a node switch (cgroup2 is not mounted)",
		Fix:    "nothing to do for browsing; mount cgroup2 at /sys/fs/cgroup to enable it",
		Detail: "keepalive clamp unavailable: no cgroup2 in /proc/self/mountinfo",
	}
}
