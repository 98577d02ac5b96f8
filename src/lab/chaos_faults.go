package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// How the faults only a chaos run makes are applied; the lab's own go
// through (*Lab).Fault. Every change is appended to the lab's fault log.

// chaosRunDirSize is the tmpfs over the daemon's run dir: room for its
// state files many times over, small enough to fill in a moment.
const chaosRunDirSize = "2m"

// chaosFillName is the filler that takes the tmpfs to its limit (a dot
// file: the state-file reader skips it).
const chaosFillName = ".chaos-fill"

// brokenConfigTail is appended to the good config for reload-broken: a
// value the schema refuses and a quote that never ends.
const brokenConfigTail = "\nconfig surflare 'main'\n\toption check_interval 'soon'\n\toption mode \"global\n"

// on switches f on; it returns a detail for the timeline.
func (c *chaosRun) on(ctx context.Context, f chaosFault) (string, error) {
	if c.l.Box() != nil {
		if detail, ok, err := c.onBox(ctx, f); ok {
			return detail, err
		}
	}
	switch f.Name {
	case ChaosNFTFlush:
		nc, err := nftConn(c.l.ns[RoleRouter])
		if err != nil {
			return "", err
		}
		nc.FlushRuleset()
		return "every table in the router", nc.Flush()
	case ChaosWANAddr:
		return c.changeWAN(f.Args[0])
	case ChaosKill9:
		pid := c.sup.kill("")
		if pid == 0 {
			return "skipped: the daemon was down (respawn pending)", nil
		}
		return fmt.Sprintf("SIGKILL pid %d", pid), nil
	case ChaosClockStep:
		pid := c.sup.kill(f.Args[0])
		if pid == 0 {
			return "skipped: the daemon was down (respawn pending)", nil
		}
		return fmt.Sprintf("SIGKILL pid %d; respawned with CLOCK_MONOTONIC/BOOTTIME %s s", pid, boundOffset(f.Args[0])), nil
	case ChaosReloadBroken:
		if err := os.WriteFile(c.l.DaemonConfigPath(), append(append([]byte(nil), c.goodConfig...), brokenConfigTail...), 0o600); err != nil {
			return "", err
		}
		return "broken config, SIGHUP", c.hup()
	case ChaosRunFull:
		n, err := fillDir(c.l.Path(dirRun))
		return fmt.Sprintf("filled with %d kB", n>>10), err
	}
	return "", c.l.Fault(ctx, f.Name, true, f.Args...)
}

// off ends f (one-shot faults have nothing to end).
func (c *chaosRun) off(ctx context.Context, f chaosFault) (string, error) {
	if c.l.Box() != nil {
		if detail, ok, err := c.offBox(ctx, f); ok {
			return detail, err
		}
	}
	switch f.Name {
	case ChaosNFTFlush:
		// The firewall's restart: fw4 back (its stand-in, lab_fw4); the
		// daemon's own tables are its job.
		err := addFW4(c.l.ns[RoleRouter])
		if err != nil && isExist(err) {
			err = nil
		}
		return "firewall restarted (lab_fw4)", err
	case ChaosReloadBroken:
		if err := os.WriteFile(c.l.DaemonConfigPath(), c.goodConfig, 0o600); err != nil {
			return "", err
		}
		return "good config, SIGHUP", c.hup()
	case ChaosRunFull:
		return "freed", os.Remove(filepath.Join(c.l.Path(dirRun), chaosFillName))
	case FaultLatency:
		return "", c.l.Fault(ctx, f.Name, false, f.Args[:1]...)
	}
	return "", c.l.Fault(ctx, f.Name, false, f.Args...)
}

// hup sends SIGHUP (a reload) to the daemon, if it is up.
func (c *chaosRun) hup() error {
	if err := c.sup.signal(syscall.SIGHUP); err != nil {
		c.note("SIGHUP not sent: %v", err)
	}
	return nil
}

// changeWAN moves pppoe-wan to a new address in the same subnet, as a new
// PPPoE lease does, and restores the default routes the address change
// flushed.
func (c *chaosRun) changeWAN(addr string) (string, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return "", err
	}
	h, err := netlinkHandle(c.l.ns[RoleRouter])
	if err != nil {
		return "", err
	}
	defer h.Close()
	link, err := h.LinkByName(IfWAN)
	if err != nil {
		return "", err
	}
	old, err := h.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return "", err
	}
	// The old address goes first: deleting a primary address deletes the
	// secondaries of its subnet with it (promote_secondaries is off), the
	// new one included.
	var was []string
	for _, o := range old {
		if o.IP.Equal(net.IP(a.AsSlice())) {
			continue
		}
		was = append(was, o.IPNet.String())
		if err := h.AddrDel(link, &o); err != nil {
			return "", err
		}
	}
	if err := h.AddrAdd(link, &netlink.Addr{IPNet: ipnet(netip.PrefixFrom(a, WANNet.Bits()))}); err != nil && !isExist(err) {
		return "", err
	}
	if err := defaultRoutes(h, IfWAN, WANGateway, WANGw6); err != nil && !isExist(err) {
		return "", err
	}
	return strings.Join(was, ",") + " -> " + a.String(), nil
}

// fillDir writes a filler file into dir until the filesystem is full and
// returns how many bytes it took.
func fillDir(dir string) (int64, error) {
	f, err := os.OpenFile(filepath.Join(dir, chaosFillName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 16<<10)
	var n int64
	for {
		k, err := f.Write(buf)
		n += int64(k)
		if errors.Is(err, unix.ENOSPC) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if n > 64<<20 {
			return n, fmt.Errorf("run dir not full after %d MB: is the tmpfs mounted?", n>>20)
		}
	}
}

// mountRunTmpfs puts a size-limited tmpfs over the lab's run dir (before
// the daemon starts), as /run is on a router.
func mountRunTmpfs(dir string) error {
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+chaosRunDirSize+",mode=0755"); err != nil {
		return fmt.Errorf("mounting a tmpfs over %s: %w", dir, err)
	}
	return nil
}

// unmountRunTmpfs removes it (lazily: a process that still has a file open
// there does not keep it mounted).
func unmountRunTmpfs(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting %s: %w", dir, err)
	}
	return nil
}

// labMounts lists mount points under the lab directories of $TMPDIR
// (mountinfo's fifth field).
func labMounts() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	base := filepath.Join(os.TempDir(), "surflare-lab-"+NamePrefix)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], base) {
			out = append(out, f[4])
		}
	}
	return out
}

// sweepChaosMounts unmounts run-dir tmpfs mounts a crashed chaos run left
// under a lab whose owner is gone (Sweep cannot remove a mounted dir).
func sweepChaosMounts() {
	for _, m := range labMounts() {
		labDir := filepath.Dir(m)
		if filepath.Base(m) == dirRun && !ownerAlive(labDir) {
			_ = unmountRunTmpfs(m)
		}
	}
}
