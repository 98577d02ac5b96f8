// Command surflare-proxy is the lab's fake of the vendor's sing-box based
// proxy: a real transparent (tproxy) TCP and UDP proxy on 127.0.0.1:10800
// that sends every connection through a lab relay (or straight, for a
// single hop) to the chosen exit node, marks its own sockets with SO_MARK
// 0xff, routes by mode (rule mode by the vendor's list, see the vendor
// knobs in lab.json) and runs urltest for every node x transit pair,
// logging failures in sing-box's format. Faults (domestic_exit, proxy_loop)
// come from the lab's faults.json.
//
// It finds its lab from its own path (<labdir>/bin/surflare-proxy) or
// $SURFLARE_LAB_DIR, and takes node and transit from the fake CLI's state.
package main

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"surflare-watchdog/src/lab"
	"surflare-watchdog/src/lab/fakes"
)

// Environment overrides, for tests and experiments.
const (
	envLabDir = "SURFLARE_LAB_DIR"      // lab directory instead of the one above bin/
	envNofile = "SURFLARE_PROXY_NOFILE" // RLIMIT_NOFILE soft limit
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "surflare-proxy:", err)
		os.Exit(1)
	}
}

// labDir is $SURFLARE_LAB_DIR or the parent of the executable's directory.
func labDir() (string, error) {
	if d := os.Getenv(envLabDir); d != "" {
		return d, nil
	}
	return fakes.LabDirOfExecutable()
}

func run() error {
	dir, err := labDir()
	if err != nil {
		return err
	}
	li, err := fakes.LoadLabInfo(dir)
	if err != nil {
		return err
	}
	st, err := fakes.LoadState(li)
	if err != nil {
		return err
	}
	nofile, err := setNofile(li)
	if err != nil {
		return err
	}
	log, err := openLog(li.ProxyLog, time.Now)
	if err != nil {
		return err
	}
	if _, err := url.Parse(li.URLTestURL); err != nil {
		return fmt.Errorf("lab.json urltest_url: %w", err)
	}
	p := &proxy{
		relays:           lab.Relays,
		relayPort:        lab.RelayPort,
		node:             st.Node,
		transit:          st.Transit,
		faults:           fakes.NewWatcher(dir, nil),
		log:              log,
		mark:             lab.MarkDirect,
		transparent:      true,
		origDst:          localAddr,
		handshakeTimeout: 5 * time.Second,
		relayTimeout:     2 * time.Second,
		urltestURL:       li.URLTestURL,
		urltestEvery:     time.Duration(li.URLTestIntervalS) * time.Second,
		urltestTimeout:   urltestTimeout(li),
	}
	p.mode, p.vendor = st.Mode, li.Vendor
	// urltest and node auto cover the exits the client offers (E1).
	p.nodes = append(p.nodes, li.Vendor.Exits...)
	if len(p.nodes) == 0 {
		for _, n := range lab.Nodes {
			p.nodes = append(p.nodes, n.Name)
		}
	}
	p.exits = map[string]netip.AddrPort{}
	for _, n := range lab.Exits {
		p.exits[n.Name] = netip.AddrPortFrom(n.Addr, lab.ExitPort)
	}
	if p.node == "" {
		p.node = lab.Nodes[0].Name
	}
	if st.Mode != "global" {
		p.direct = []netip.Prefix{lab.DomesticNet}
	}
	if p.transit == "" {
		p.transit = fakes.TransitAuto
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if d := time.Duration(li.Vendor.ProxyDelayMS) * time.Millisecond; d > 0 {
		// E6: the tunnel comes up a while after connect --daemon returned.
		log.Info(fmt.Sprintf("surflare-proxy starting: pid=%d, listening in %s", os.Getpid(), d))
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil
		}
	}
	listenAddr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), lab.ProxyPort).String()
	ln, err := p.listen(ctx, listenAddr)
	if err != nil {
		log.Error(0, 0, "inbound/tproxy[tproxy-in]: "+err.Error())
		return err
	}
	if li.Vendor.UDP {
		// E8: the real proxy captures UDP too.
		uc, err := p.listenUDP(listenAddr)
		if err != nil {
			log.Error(0, 0, "inbound/tproxy[tproxy-in]: "+err.Error())
			return err
		}
		go p.serveUDP(ctx, uc)
	}
	log.Info(fmt.Sprintf("surflare-proxy started: pid=%d node=%q transit=%s mode=%s listen=%s nofile=%d udp=%v",
		os.Getpid(), p.node, p.transit, st.Mode, listenAddr, nofile, li.Vendor.UDP))
	go p.urltestLoop(ctx)
	p.serve(ctx, ln)
	log.Info("surflare-proxy stopped")
	return nil
}

func urltestTimeout(li fakes.LabInfo) time.Duration {
	if li.URLTestTimeoutMS > 0 {
		return time.Duration(li.URLTestTimeoutMS) * time.Millisecond
	}
	return 2 * time.Second
}

// setNofile pins the RLIMIT_NOFILE soft limit (env, then lab.json, then
// fakes.DefaultProxyNofile) so fd exhaustion under a loop happens at a
// known point. Go raises the soft limit to the hard one at start-up; this
// undoes that.
func setNofile(li fakes.LabInfo) (uint64, error) {
	n := uint64(fakes.DefaultProxyNofile)
	if li.ProxyNofile > 0 {
		n = uint64(li.ProxyNofile)
	}
	if s := os.Getenv(envNofile); s != "" {
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil || v < 16 {
			return 0, fmt.Errorf("%s=%q: want a number >= 16", envNofile, s)
		}
		n = v
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("reading RLIMIT_NOFILE: %w", err)
	}
	rl.Cur = min(n, rl.Max)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("setting RLIMIT_NOFILE to %d: %w", n, err)
	}
	return rl.Cur, nil
}
