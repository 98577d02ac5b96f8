package internet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"surflare-watchdog/src/lab"
	"surflare-watchdog/src/lab/fakes"
)

// handshakeTimeout bounds reading a CONNECT line from a client.
const handshakeTimeout = 10 * time.Second

// handleRelay serves one tunnel at relay r: it forwards the CONNECT line to
// the named exit from the relay's own address and relays the answer.
func (s *Servers) handleRelay(ctx context.Context, r lab.Relay, c net.Conn) {
	c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	line, err := fakes.ReadLine(c)
	if err != nil {
		c.Close()
		return
	}
	f := s.cfg.Faults.Current()
	if f.IsNodeDown(r.Name) {
		fakes.Reset(c)
		return
	}
	exit, dst, err := fakes.ParseConnect(line)
	if err != nil {
		refuse(c, err.Error())
		return
	}
	if !sleepCtx(ctx, f.Latency(r.Name)) {
		c.Close()
		return
	}
	exitAddr, ok := s.exitAddr(exit)
	if !ok {
		refuse(c, "unknown exit "+exit)
		return
	}
	dctx, cancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
	defer cancel()
	up, err := fakes.DialTunnel(dctx, dialerFrom(r.Addr, exitAddr.Addr()).DialContext, exitAddr.String(), exit, dst)
	if err != nil {
		var te *fakes.TunnelError
		if errors.As(err, &te) {
			refuse(c, te.Reason)
		} else {
			refuse(c, fmt.Sprintf("exit %s: %v", exit, shortErr(err)))
		}
		return
	}
	c.SetReadDeadline(time.Time{})
	if _, err := io.WriteString(c, fakes.ReplyOK+"\n"); err != nil {
		c.Close()
		up.Close()
		return
	}
	fakes.Pipe(ctx, c, up, s.chunkDelay(ctx, r.Name))
}

// exitAddr resolves an exit by node name or literal "addr:port".
func (s *Servers) exitAddr(exit string) (netip.AddrPort, bool) {
	for _, n := range s.cfg.Nodes {
		if n.Name == exit {
			return netip.AddrPortFrom(n.Addr, s.cfg.ExitPort), true
		}
	}
	ap, err := netip.ParseAddrPort(exit)
	return ap, err == nil
}

// handleExit serves one tunnel at exit n: it dials the destination from the
// exit's own address (so echo hosts report the exit), or plays a dead or
// 503-ing node when a fault says so.
func (s *Servers) handleExit(ctx context.Context, n lab.Node, c net.Conn) {
	c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	line, err := fakes.ReadLine(c)
	if err != nil {
		c.Close()
		return
	}
	f := s.cfg.Faults.Current()
	if f.IsNodeDown(n.Name) {
		fakes.Reset(c)
		return
	}
	_, dst, err := fakes.ParseConnect(line)
	if err != nil {
		refuse(c, err.Error())
		return
	}
	if !sleepCtx(ctx, f.Latency(n.Name)) {
		c.Close()
		return
	}
	if udpDst, ok := strings.CutPrefix(dst, fakes.UDPPrefix); ok {
		s.exitUDP(ctx, n, c, udpDst)
		return
	}
	if f.Is503(n.Name) {
		s.exit503(ctx, n, c, dst)
		return
	}
	dstAP, err := netip.ParseAddrPort(dst)
	if err != nil {
		refuse(c, "destination must be addr:port, got "+dst)
		return
	}
	d := dialerFrom(n.Addr, dstAP.Addr())
	d.Timeout = s.cfg.DialTimeout
	up, err := d.DialContext(ctx, "tcp", dst)
	if err != nil {
		refuse(c, shortErr(err))
		return
	}
	c.SetReadDeadline(time.Time{})
	if _, err := io.WriteString(c, fakes.ReplyOK+"\n"); err != nil {
		c.Close()
		up.Close()
		return
	}
	fakes.Pipe(ctx, c, up, s.chunkDelay(ctx, n.Name))
}

// URLTestPath is the path of the proxy's urltest target: a 503-ing exit
// answers requests for it with 503 and serves everything else, like a CDN
// front that rejects the connectivity-check endpoint (ADR-0001's storm:
// urltest fails while ordinary traffic still works).
const URLTestPath = "/generate_204"

// tlsHandshakeRecord is the first byte of a TLS connection (a handshake
// record, the ClientHello).
const tlsHandshakeRecord = 0x16

// exit503 serves one tunnel at a 503-ing exit: the first request decides;
// a urltest request gets 503s, anything else is tunnelled as usual.
func (s *Servers) exit503(ctx context.Context, n lab.Node, c net.Conn, dst string) {
	c.SetReadDeadline(time.Time{})
	if _, err := io.WriteString(c, fakes.ReplyOK+"\n"); err != nil {
		c.Close()
		return
	}
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	var first []byte
	peek, err := br.Peek(1)
	if err == nil && peek[0] != tlsHandshakeRecord {
		// A TLS ClientHello need not hold a '\n': it is tunnelled
		// unread, and the https server answers a 503-ing exit's
		// urltest request (from503Exit).
		first, err = br.ReadSlice('\n')
	}
	if err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	if fields := strings.Fields(string(first)); len(fields) >= 2 && strings.HasPrefix(fields[1], URLTestPath) {
		serve503(c, io.MultiReader(strings.NewReader(string(first)), br))
		c.Close()
		return
	}
	dstAP, err := netip.ParseAddrPort(dst)
	if err != nil {
		c.Close()
		return
	}
	d := dialerFrom(n.Addr, dstAP.Addr())
	d.Timeout = s.cfg.DialTimeout
	up, err := d.DialContext(ctx, "tcp", dst)
	if err != nil {
		c.Close()
		return
	}
	// What the client sent so far goes first, then the tunnel as usual.
	head := append([]byte(nil), first...)
	if k := br.Buffered(); k > 0 {
		b, _ := br.Peek(k)
		head = append(head, b...)
	}
	if _, err := up.Write(head); err != nil {
		c.Close()
		up.Close()
		return
	}
	fakes.Pipe(ctx, c, up, s.chunkDelay(ctx, n.Name))
}

// serve503 answers every HTTP request read from r with 503 on c until the
// client stops.
func serve503(c net.Conn, r io.Reader) {
	br := bufio.NewReader(r)
	for {
		c.SetReadDeadline(time.Now().Add(handshakeTimeout))
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
		body := "503 Service Unavailable\n"
		fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		if req.Close {
			return
		}
	}
}

// chunkDelay returns the per-chunk delay for name: half its latency fault in
// each direction, re-read for every chunk so changes apply to live tunnels.
func (s *Servers) chunkDelay(ctx context.Context, name string) func() {
	return func() { sleepCtx(ctx, s.cfg.Faults.Current().Latency(name)/2) }
}

// dialerFrom binds the local address to from when the families match.
func dialerFrom(from, to netip.Addr) *net.Dialer {
	d := &net.Dialer{}
	if from.Is4() == to.Is4() {
		d.LocalAddr = &net.TCPAddr{IP: from.AsSlice()}
	}
	return d
}

func refuse(c net.Conn, reason string) {
	reason = strings.ReplaceAll(reason, "\n", " ")
	io.WriteString(c, fakes.ReplyErr+" "+reason+"\n")
	c.Close()
}

// shortErr drops the "dial tcp a->b:" noise but keeps the cause.
func shortErr(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

// exitUDP serves one UDP association at exit n (E8): datagrams framed on
// the tunnel go to dst from the exit's own address, and the answers come
// back framed, until either side stops or the association idles for
// udpIdle.
func (s *Servers) exitUDP(ctx context.Context, n lab.Node, c net.Conn, dst string) {
	dstAP, err := netip.ParseAddrPort(dst)
	if err != nil {
		refuse(c, "destination must be udp/addr:port, got "+dst)
		return
	}
	up, err := net.DialUDP("udp4", &net.UDPAddr{IP: n.Addr.AsSlice()}, net.UDPAddrFromAddrPort(dstAP))
	if err != nil {
		refuse(c, shortErr(err))
		return
	}
	defer up.Close()
	c.SetReadDeadline(time.Time{})
	if _, err := io.WriteString(c, fakes.ReplyOK+"\n"); err != nil {
		c.Close()
		return
	}
	stop := context.AfterFunc(ctx, func() { c.Close(); up.Close() })
	defer stop()
	go func() {
		defer c.Close()
		buf := make([]byte, fakes.MaxDatagram)
		for {
			up.SetReadDeadline(time.Now().Add(udpIdle))
			k, err := up.Read(buf)
			if err != nil || fakes.WriteDatagram(c, buf[:k]) != nil {
				return
			}
		}
	}()
	for {
		c.SetReadDeadline(time.Now().Add(udpIdle))
		b, err := fakes.ReadDatagram(c)
		if err != nil {
			c.Close()
			return
		}
		up.Write(b)
	}
}

// udpIdle ends a UDP association nobody uses.
const udpIdle = 30 * time.Second
