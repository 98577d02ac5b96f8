package lab

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"surflare-watchdog/src/lab/fakes"
)

// VendorTimeout bounds one call of the fake vendor CLI made by the lab
// (login can be made to hang by a fault).
const VendorTimeout = 10 * time.Second

// Surflare runs the lab's `surflare` CLI with args in the router namespace
// and returns its combined output (an error on non-zero exit or timeout).
func (l *Lab) Surflare(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, VendorTimeout)
	defer cancel()
	return l.Exec(ctx, RoleRouter, append([]string{l.Path(dirBin, fakes.CLIName)}, args...)...)
}

// Login logs the fake CLI in with the lab account.
func (l *Lab) Login(ctx context.Context) error {
	_, err := l.Surflare(ctx, "login", "-u", LabUsername, "-p", fakes.LabPassword, "--remember")
	return err
}

// Connect does what the watchdog does when bringing the tunnel up, without
// it: login, then `surflare connect --node NODE --transit auto --daemon` (NODE "" = the
// first exit). The vendor table, fwmark rule and table-100 route then carry
// router-originated traffic; LAN traffic also needs InstallLANTProxy (or
// the daemon's own LAN table).
func (l *Lab) Connect(ctx context.Context, node string) error {
	if node == "" {
		node = Nodes[0].Name
	}
	if err := l.Login(ctx); err != nil {
		return err
	}
	// --transit auto, as the lab config's daemon passes it: without it a
	// connect is single-hop (E4, knob no_transit).
	_, err := l.Surflare(ctx, "connect", "--node", node, "--transit", fakes.TransitAuto, "--daemon")
	return err
}

// Reconnect runs `surflare disconnect` (whatever it says) and Connect: the
// manual recovery after a proxy crash or a table wipe.
func (l *Lab) Reconnect(ctx context.Context, node string) error {
	_, _ = l.Surflare(ctx, "disconnect")
	return l.Connect(ctx, node)
}

// WaitClientExit polls client i's IP echo until it reports want (an exit
// address, or WANRouter for direct) or ctx ends; it returns the last echo.
func (l *Lab) WaitClientExit(ctx context.Context, client int, want string) (Echo, error) {
	var last Echo
	var lastErr error
	for {
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		e, err := l.ClientEcho(fctx, client)
		cancel()
		if err == nil && e.IP == want {
			return e, nil
		}
		last, lastErr = e, err
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return last, fmt.Errorf("client %d never saw exit %s: %w", client, want, lastErr)
			}
			return last, fmt.Errorf("client %d saw %s (%s), want %s", client, last.IP, last.Country, want)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// CheckVendor reports knobs (KEY=VALUE, fakes.Knobs) that a lab would
// refuse, without bringing one up.
func CheckVendor(knobs []string) error {
	_, err := vendorInfo(fakes.DefaultLabInfo("", ""), knobs)
	return err
}

// vendorInfo applies knobs to li and checks the exit names against the
// exits the lab's internet serves.
func vendorInfo(li fakes.LabInfo, knobs []string) (fakes.LabInfo, error) {
	for _, kv := range knobs {
		if err := fakes.ApplyKnob(&li, kv); err != nil {
			return li, err
		}
	}
	for _, name := range li.Vendor.Exits {
		if !slices.ContainsFunc(Exits, func(n Node) bool { return n.Name == name }) {
			return li, fmt.Errorf("--vendor exits: %q is not a lab exit (%s)", name, exitNames())
		}
	}
	return li, nil
}

func exitNames() string {
	var s []string
	for _, n := range Exits {
		s = append(s, n.Name)
	}
	return strings.Join(s, ", ")
}

// VendorInfo is the lab's lab.json as the fakes read it.
func (l *Lab) VendorInfo() (fakes.LabInfo, error) { return fakes.LoadLabInfo(l.Dir) }

// SetVendor changes knobs of a running lab (lab.json). The CLI reads them
// at every call and the account API within fakes.WatchInterval; the proxy
// reads them when it starts, so proxy-side knobs need a (re)connect.
func (l *Lab) SetVendor(knobs ...string) error {
	li, err := fakes.LoadLabInfo(l.Dir)
	if err != nil {
		return err
	}
	if li, err = vendorInfo(li, knobs); err != nil {
		return err
	}
	return li.Save(l.Dir)
}
