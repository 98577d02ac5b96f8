package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"surflare-watchdog/src/lab"
)

func init() {
	register(&command{
		name: "up", args: "[--set surflare.S.O=V]... [--detach] [--openwrt]",
		summary: "bring a lab up and keep it until Ctrl-C (or detach)",
		run:     runUp,
	})
}

func runUp(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	var sets setFlags
	fs.Var(&sets, "set", "override in the daemon's lab config, surflare.SECTION.OPTION=VALUE (repeatable)")
	vendor := vendorFlag(fs)
	clients := fs.Int("clients", 2, "number of LAN clients (1-3)")
	detach := fs.Bool("detach", false, "run the lab in the background; stop it with surflare-lab down")
	pidfile := fs.String("pidfile", "", "with --detach: write the lab holder's pid here")
	connect := fs.Bool("connect", false, "log the fake vendor client in and connect it (plus the lab's LAN tproxy table), for use without the daemon")
	noServers := fs.Bool("no-servers", false, "topology only: no binaries, no internet servers")
	child := fs.Bool("detached-child", false, "internal: the background holder started by --detach")
	openwrt := fs.Bool("openwrt", false, openwrtUsage)
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if err := lab.CheckVendor(*vendor); err != nil {
		fmt.Fprintf(os.Stderr, "surflare-lab up: %v\n", err)
		return exitUsage
	}
	if !needRoot("up") {
		return exitFailure
	}
	if *detach {
		return detachUp(args, *pidfile)
	}
	report := func(format string, a ...any) { fmt.Printf(format, a...) }
	if *child {
		report = func(string, ...any) {}
	}
	l, err := lab.Up(ctx, lab.Options{Clients: *clients, Set: sets, Vendor: *vendor, NoServers: *noServers, OpenWrt: openwrtOption(*openwrt)})
	if err != nil {
		childReport(*child, "ERR "+err.Error())
		fmt.Fprintf(os.Stderr, "surflare-lab up: %v\n", err)
		return exitFailure
	}
	defer l.Close()
	if *connect {
		if err := l.Connect(ctx, ""); err == nil {
			err = l.InstallLANTProxy()
		}
		if err != nil {
			childReport(*child, "ERR "+err.Error())
			fmt.Fprintf(os.Stderr, "surflare-lab up: connecting the fake client: %v\n", err)
			return exitFailure
		}
	}
	childReport(*child, l.Prefix)
	report("lab %s up in %s (binaries: %s)\n", l.Prefix, l.UpTime.Round(1e6), l.BuildTime.Round(1e6))
	printLabInfo(l)
	report("Ctrl-C tears it down.\n")
	<-ctx.Done()
	report("\ntearing down lab %s\n", l.Prefix)
	return exitOK
}

// printLabInfo says how to use a running lab.
func printLabInfo(l *lab.Lab) {
	fmt.Printf("  dir:      %s\n", l.Dir)
	fmt.Printf("  config:   %s\n", l.DaemonConfigPath())
	for i, c := range l.Clients() {
		fmt.Printf("  client %d: ip netns exec %s …   (%s, %s)\n", i, l.NSName(c.Role), c.Addr, c.MAC)
	}
	fmt.Printf("  router:   ip netns exec %s …\n", l.NSName(lab.RoleRouter))
	if b := l.Box(); b != nil {
		fmt.Printf("  OpenWrt:  box pid %d; its shell: %s %s   (config /etc/config/surflare in the box)\n", b.PID, filepath.Join(b.Dir, "enter.sh"), b.NetNS)
	}
	fmt.Printf("  faults:   surflare-lab fault --lab %s NAME on|off [ARG]\n", l.Prefix)
}

// childReport tells the --detach parent (fd 3) how the start went.
func childReport(child bool, line string) {
	if !child {
		return
	}
	f := os.NewFile(3, "report")
	fmt.Fprintln(f, line)
	f.Close()
}

// detachUp starts `up --detached-child` in its own session and waits for
// its report, so `up --detach` returns only once the lab is ready.
func detachUp(args []string, pidfile string) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "surflare-lab up: %v\n", err)
		return exitFailure
	}
	var childArgs []string
	for _, a := range args {
		if a != "--detach" && a != "-detach" {
			childArgs = append(childArgs, a)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "surflare-lab up: %v\n", err)
		return exitFailure
	}
	cmd := exec.Command(exe, append([]string{"up", "--detached-child"}, childArgs...)...)
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "surflare-lab up: %v\n", err)
		return exitFailure
	}
	w.Close()
	line, _ := bufio.NewReader(r).ReadString('\n')
	line = strings.TrimSpace(line)
	if line == "" || strings.HasPrefix(line, "ERR ") {
		fmt.Fprintf(os.Stderr, "surflare-lab up: background lab failed: %s\n", strings.TrimPrefix(line, "ERR "))
		return exitFailure
	}
	if pidfile != "" {
		if err := os.WriteFile(pidfile, fmt.Appendf(nil, "%d\n", cmd.Process.Pid), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "surflare-lab up: pidfile: %v\n", err)
		}
	}
	fmt.Printf("lab %s up in the background (pid %d); stop it with: surflare-lab down --lab %s\n", line, cmd.Process.Pid, line)
	return exitOK
}

// openwrtUsage describes --openwrt (up, scenario, demo).
const openwrtUsage = "the router is real OpenWrt: boot the OpenWrt box beside the checkout (../shared/owrt) in the router namespace and install the packages from build/ipk (make ipk) with its opkg"

// openwrtOption is lab.Options.OpenWrt for the --openwrt flag.
func openwrtOption(on bool) *lab.OpenWrt {
	if !on {
		return nil
	}
	return &lab.OpenWrt{}
}
