package fakes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// The lab's tunnel protocol, spoken by the fake proxy to a relay and by a
// relay to an exit: the client sends one line
//
//	CONNECT <exit-name-or-addr> <dsthost:port>\n
//
// (exit names may contain spaces; the destination is the last field), the
// far end answers "OK\n" or "ERR <reason>\n" back through the chain, and then
// bytes are piped both ways. Lines are read one byte at a time so that no
// payload is swallowed by a buffer.

// MaxLineLen bounds a protocol line.
const MaxLineLen = 512

// Replies.
const (
	ReplyOK  = "OK"
	ReplyErr = "ERR"
)

// TunnelError is a refusal ("ERR reason") from the far end of a tunnel.
type TunnelError struct{ Reason string }

func (e *TunnelError) Error() string { return "tunnel refused: " + e.Reason }

// FormatConnect returns the CONNECT line for exit and dst, with newline.
func FormatConnect(exit, dst string) string { return "CONNECT " + exit + " " + dst + "\n" }

// ParseConnect splits a CONNECT line (without newline) into exit and dst.
func ParseConnect(line string) (exit, dst string, err error) {
	rest, ok := strings.CutPrefix(line, "CONNECT ")
	if !ok {
		return "", "", fmt.Errorf("tunnel: want %q, got %.40q", "CONNECT <exit> <dst>", line)
	}
	i := strings.LastIndexByte(rest, ' ')
	if i <= 0 || i == len(rest)-1 {
		return "", "", fmt.Errorf("tunnel: malformed CONNECT line %.60q", line)
	}
	exit, dst = strings.TrimSpace(rest[:i]), rest[i+1:]
	if _, _, err := net.SplitHostPort(dst); err != nil || exit == "" {
		return "", "", fmt.Errorf("tunnel: bad destination in %.60q", line)
	}
	return exit, dst, nil
}

// ReadLine reads one '\n'-terminated line without over-reading, returning it
// without the newline.
func ReadLine(r io.Reader) (string, error) {
	var b strings.Builder
	var c [1]byte
	for b.Len() <= MaxLineLen {
		n, err := r.Read(c[:])
		if n == 1 {
			if c[0] == '\n' {
				return b.String(), nil
			}
			b.WriteByte(c[0])
			continue
		}
		if err == io.EOF {
			return "", io.ErrUnexpectedEOF
		}
		if err != nil {
			return "", err
		}
	}
	return "", errors.New("tunnel: line too long")
}

// ParseReply turns a reply line into nil (OK) or a *TunnelError.
func ParseReply(line string) error {
	if line == ReplyOK {
		return nil
	}
	if reason, ok := strings.CutPrefix(line, ReplyErr+" "); ok {
		return &TunnelError{Reason: reason}
	}
	return &TunnelError{Reason: fmt.Sprintf("bad reply %.40q", line)}
}

// DialFunc dials a TCP address; the proxy passes one that sets SO_MARK.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// DialTunnel connects to relayAddr, asks it for exit and dst, and returns the
// connection once the chain answered OK. The handshake is bounded by ctx.
func DialTunnel(ctx context.Context, dial DialFunc, relayAddr, exit, dst string) (net.Conn, error) {
	c, err := dial(ctx, "tcp", relayAddr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := io.WriteString(c, FormatConnect(exit, dst)); err != nil {
		c.Close()
		return nil, fmt.Errorf("tunnel via %s: %w", relayAddr, err)
	}
	line, err := ReadLine(c)
	if err == nil {
		err = ParseReply(line)
	}
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		c.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("tunnel via %s: %w", relayAddr, err)
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// Pipe copies both ways between a and b until both directions end or ctx
// is cancelled, half-closing where possible, and then closes both. delay,
// if not nil, is called before each chunk is forwarded (user-space latency).
func Pipe(ctx context.Context, a, b net.Conn, delay func()) {
	stop := context.AfterFunc(ctx, func() { a.Close(); b.Close() })
	defer stop()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); copyHalf(b, a, delay) }()
	go func() { defer wg.Done(); copyHalf(a, b, delay) }()
	wg.Wait()
	a.Close()
	b.Close()
}

func copyHalf(dst, src net.Conn, delay func()) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if delay != nil {
				delay()
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
		}
		if err != nil {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok && errors.Is(err, io.EOF) {
				cw.CloseWrite()
			} else {
				dst.Close()
			}
			return
		}
	}
}

// Reset closes c with an RST instead of a FIN (SO_LINGER 0), the way a dead
// node or an injected reset looks to its peer.
func Reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// UDP over the tunnel (E8: the real proxy captures UDP too). The CONNECT
// line names the destination as "udp/ADDR:PORT"; after OK, each datagram
// travels both ways as a 2-byte big-endian length and its bytes. Relays
// pass the line and the bytes on unchanged; the exit sends the datagrams
// from its own address.

// UDPPrefix marks a UDP destination in a CONNECT line.
const UDPPrefix = "udp/"

// MaxDatagram bounds one datagram on the tunnel.
const MaxDatagram = 65535

// WriteDatagram writes one framed datagram to w in a single write.
func WriteDatagram(w io.Writer, b []byte) error {
	if len(b) > MaxDatagram {
		return fmt.Errorf("datagram of %d bytes is too large", len(b))
	}
	frame := make([]byte, 2+len(b))
	frame[0], frame[1] = byte(len(b)>>8), byte(len(b))
	copy(frame[2:], b)
	_, err := w.Write(frame)
	return err
}

// ReadDatagram reads one framed datagram from r.
func ReadDatagram(r io.Reader) ([]byte, error) {
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	b := make([]byte, int(n[0])<<8|int(n[1]))
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}
