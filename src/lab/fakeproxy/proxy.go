package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"surflare-watchdog/src/lab"
	"surflare-watchdog/src/lab/fakes"
)

// proxy is the fake surflare-proxy: a transparent TCP proxy that sends
// every connection through relay -> exit, plus the urltest loop.
type proxy struct {
	relays    []lab.Relay
	relayPort uint16
	nodes     []string // urltest candidates
	node      string   // current exit
	transit   string   // relay name or fakes.TransitAuto
	// direct are destinations sent without the tunnel (rule mode: the
	// domestic network, like sing-box's geoip-cn -> direct rule).
	direct []netip.Prefix
	// mode is the connect --mode: "rule" (or ""), "global" or "direct".
	mode string
	// vendor holds the knobs the proxy follows (rule routing, log format).
	vendor fakes.Vendor
	// exits are the exits' tunnel addresses by name, for single-hop
	// connections (transit none) and for node auto.
	exits map[string]netip.AddrPort

	faults *fakes.Watcher
	log    *logFile

	// mark is SO_MARK for outbound sockets (0 = leave unmarked, for root-less tests).
	mark int
	// transparent sets IP_TRANSPARENT on the listener so tproxy can deliver to it.
	transparent bool
	// origDst is where the client wanted to go; with tproxy that is the
	// accepted socket's local address.
	origDst func(net.Conn) netip.AddrPort

	handshakeTimeout time.Duration // whole tunnel set-up
	relayTimeout     time.Duration // one relay's TCP connect (auto moves on after it)
	urltestURL       string
	urltestEvery     time.Duration
	urltestTimeout   time.Duration
}

func localAddr(c net.Conn) netip.AddrPort { return addrPort(c.LocalAddr()) }

func addrPort(a net.Addr) netip.AddrPort {
	ap, _ := netip.ParseAddrPort(a.String())
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// listen opens the proxy's listener at addr.
func (p *proxy) listen(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{}
	if p.transparent {
		lc.Control = func(network, address string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1)
			})
			return errors.Join(err, serr)
		}
	}
	ln, err := lc.Listen(ctx, "tcp4", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return ln, nil
}

// serve accepts until ctx ends. Running out of descriptors (a loop) does
// not stop it: it logs at most once a second and keeps trying, like a real
// proxy under fd exhaustion.
func (p *proxy) serve(ctx context.Context, ln net.Listener) {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	self := addrPort(ln.Addr())
	var lastLogged time.Time
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			if time.Since(lastLogged) > time.Second {
				lastLogged = time.Now()
				p.log.Error(rand.Uint32(), 0, "inbound/tproxy[tproxy-in]: "+err.Error())
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.handle(ctx, c, self)
		}()
	}
}

// handle proxies one accepted connection.
func (p *proxy) handle(ctx context.Context, c net.Conn, self netip.AddrPort) {
	dst := p.origDst(c)
	if dst == self || !dst.IsValid() {
		// Someone connected to the proxy port itself: nothing to proxy.
		c.Close()
		return
	}
	start := time.Now()
	f := p.faults.Current()
	var head []byte
	host := ""
	if p.sniffs() {
		head, host = sniffHTTP(c)
	}
	var up net.Conn
	var err error
	route := "direct"
	if p.goesDirect(f, host, dst.Addr(), false) {
		d := p.dialer(f)
		d.Timeout = p.handshakeTimeout
		up, err = d.DialContext(ctx, "tcp", dst.String())
	} else {
		route = p.node + " via " + p.transit
		up, err = p.openTunnel(ctx, f, p.node, p.transit, dst.String())
	}
	if err == nil && len(head) > 0 {
		_, err = up.Write(head)
	}
	if err != nil {
		p.logFailed(start, addrPort(c.RemoteAddr()), dst, route, err)
		if up != nil {
			up.Close()
		}
		fakes.Reset(c)
		return
	}
	fakes.Pipe(ctx, c, up, nil)
}

// sniffs reports whether routing needs the HTTP host (rule mode with the
// vendor's list, E3).
func (p *proxy) sniffs() bool {
	return p.ruleMode() && p.vendor.RuleRouting == fakes.RoutingList
}

func (p *proxy) ruleMode() bool { return p.mode == "" || p.mode == "rule" }

// goesDirect is the routing decision for one connection to dst (host as
// sniffed, "" if none): the domestic_exit fault and mode direct send
// everything direct, mode global nothing; rule mode sends the domestic
// range direct and then, with the vendor's list (E3), everything not on
// it, with the old fake's routing (legacy) nothing else. DNS over UDP in
// rule mode takes the plain path, where it can be poisoned.
func (p *proxy) goesDirect(f fakes.Faults, host string, dst netip.Addr, dns bool) bool {
	switch {
	case f.DomesticExit || p.mode == "direct":
		return true
	case p.mode == "global":
		return false
	case p.isDirect(dst):
		return true
	case p.vendor.RuleRouting == fakes.RoutingList:
		return !p.vendor.RuleMatch(host, dst)
	}
	return dns
}

// logFailed logs a failed proxied connection at ERROR as stock sing-box
// does (DESIGN §9), in the log_format knob's version.
func (p *proxy) logFailed(start time.Time, src, dst netip.AddrPort, route string, err error) {
	msg := dialError(dst, err)
	switch p.vendor.LogFormat {
	case fakes.LogNone:
		return
	case fakes.LogSingBox18:
		msg = fmt.Sprintf("inbound/tproxy[tproxy-in]: process connection from %s: %s", src, msg)
	default:
		typ := "vless"
		if route == "direct" {
			typ = "direct"
		}
		msg = fmt.Sprintf("connection: open connection to %s using outbound/%s[%s]: %s", dst, typ, route, msg)
	}
	p.log.Error(rand.Uint32(), time.Since(start), msg)
}

// dialError words err as sing-box's dialer does: a timeout is
// "dial tcp DST: i/o timeout"; other errors keep their own words.
func dialError(dst netip.AddrPort, err error) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return "dial tcp " + dst.String() + ": i/o timeout"
	}
	return err.Error()
}

// sniffHTTP reads what the client sends first (up to 4 KiB, at most
// sniffTimeout) and returns it with the HTTP Host header, if any: the
// vendor's rule mode routes by domain, as sing-box's sniffing does.
func sniffHTTP(c net.Conn) ([]byte, string) {
	c.SetReadDeadline(time.Now().Add(sniffTimeout))
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, 0, 4096)
	for len(buf) < cap(buf) {
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if i := strings.Index(string(buf), "\r\n\r\n"); i >= 0 || err != nil {
			break
		}
	}
	for _, line := range strings.Split(string(buf), "\r\n")[1:] {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(k), "host") {
			return buf, strings.TrimSpace(v)
		}
		if line == "" {
			break
		}
	}
	return buf, ""
}

// sniffTimeout bounds how long the proxy waits for a client's first bytes.
const sniffTimeout = 500 * time.Millisecond

// dialer returns a dialer for the proxy's own outbound sockets: marked
// 0xff so the policy rules let them out directly, unless the proxy_loop
// fault drops the mark.
func (p *proxy) dialer(f fakes.Faults) *net.Dialer {
	d := &net.Dialer{}
	if p.mark == 0 || f.ProxyLoop {
		return d
	}
	mark := p.mark
	d.Control = func(network, address string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, mark)
		})
		if serr != nil {
			return fmt.Errorf("setting SO_MARK %#x: %w", mark, serr)
		}
		return err
	}
	return d
}

// openTunnel connects to node through transit. With transit auto it tries
// the relays in order and uses the first that answers the handshake; a
// refusal from the exit (ERR) is final, since every relay leads to it.
func (p *proxy) openTunnel(ctx context.Context, f fakes.Faults, node, transit, dst string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.handshakeTimeout)
	defer cancel()
	d := p.dialer(f)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dctx, cancel := context.WithTimeout(ctx, p.relayTimeout)
		defer cancel()
		return d.DialContext(dctx, network, addr)
	}
	if node == fakes.NodeAuto {
		return p.openAuto(ctx, f, transit, dst)
	}
	if transit == fakes.TransitNone {
		// E4: single hop, straight to the exit's tunnel port.
		exit, ok := p.exits[node]
		if !ok {
			return nil, fmt.Errorf("unknown exit %q", node)
		}
		return fakes.DialTunnel(ctx, dial, exit.String(), node, dst)
	}
	var errs []error
	for _, r := range p.relays {
		if transit != fakes.TransitAuto && transit != r.Name {
			continue
		}
		addr := net.JoinHostPort(r.Addr.String(), strconv.Itoa(int(p.relayPort)))
		c, err := fakes.DialTunnel(ctx, dial, addr, node, dst)
		if err == nil {
			return c, nil
		}
		var te *fakes.TunnelError
		if errors.As(err, &te) || ctx.Err() != nil {
			return nil, err
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("unknown transit %q", transit)
	}
	return nil, errors.Join(errs...)
}

func (p *proxy) isDirect(a netip.Addr) bool {
	for _, pfx := range p.direct {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// openAuto is node auto (E1): the client picks the exit, here the first of
// the exits (in list order) whose tunnel opens.
func (p *proxy) openAuto(ctx context.Context, f fakes.Faults, transit, dst string) (net.Conn, error) {
	var errs []error
	for _, n := range p.nodes {
		c, err := p.openTunnel(ctx, f, n, transit, dst)
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, errors.New("node auto: no exits")
	}
	return nil, errors.Join(errs...)
}
