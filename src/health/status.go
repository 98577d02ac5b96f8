package health

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"
)

// The 503 probe asks every 2 s (storm503.probe_interval), so its request
// is the daemon's most frequent piece of work while idle (issue 19). It
// needs no more than a status line, and net/http's client costs a round
// more CPU than the request itself: the transport's two goroutines per
// connection (DisableKeepAlives makes every round a new one), its request
// and header maps, its response parsing (http: ~480 µs against ~290 µs
// above the bare wake-up, loopback; on https, the shipped default, the
// lab's footprint measured +1.5 s/h for net/http's round against +0.3 s/h
// for the handshake itself). statusGET writes the request and reads the
// status line on the caller's goroutine, on a fresh connection through the
// same dialer as every probe, with TLS on https (the probes' TLS
// configuration: session resumed, X25519; the certificate verified against
// the URL's host as net/http does). Redirects are not followed, as the
// checks' probes do not.

// maxStatusLine bounds the bytes read for the status line.
const maxStatusLine = 512

// statusGET asks u through d and returns the status code of the answer;
// the connection is closed after the status line. tc is the TLS
// configuration for an https URL, nil for http.
func statusGET(ctx context.Context, d Dialer, u *url.URL, tc *tls.Config, timeout time.Duration) (int, error) {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if b := ProbeBoundFrom(ctx); b != nil { // as probe: a confirming check's bound
		var stop func()
		pctx, stop = b.bind(pctx)
		defer stop()
	}
	ctx = pctx
	port := u.Port()
	if port == "" {
		port = map[bool]string{false: "80", true: "443"}[tc != nil]
	}
	raw, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return 0, err
	}
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		raw.SetDeadline(dl)
	}
	conn := net.Conn(raw)
	if tc != nil {
		cfg := tc.Clone() // shares the session cache
		cfg.ServerName = u.Hostname()
		tconn := tls.Client(raw, cfg)
		if err := tconn.HandshakeContext(ctx); err != nil {
			return 0, ctxErr(ctx, err)
		}
		conn = tconn
	}
	req := make([]byte, 0, 160)
	req = fmt.Appendf(req, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: surflare-watchdog\r\nConnection: close\r\n\r\n", u.RequestURI(), u.Host)
	if _, err := conn.Write(req); err != nil {
		return 0, ctxErr(ctx, err)
	}
	var buf [maxStatusLine]byte
	n := 0
	for {
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			return parseStatusLine(buf[:i])
		}
		if n == len(buf) {
			return 0, errors.New("malformed HTTP response: no status line in the first 512 bytes")
		}
		m, err := conn.Read(buf[n:])
		n += m
		if err != nil && bytes.IndexByte(buf[:n], '\n') < 0 {
			return 0, ctxErr(ctx, err)
		}
	}
}

// parseStatusLine reads "HTTP/1.x NNN reason".
func parseStatusLine(line []byte) (int, error) {
	line = bytes.TrimRight(line, "\r")
	proto, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok || !bytes.HasPrefix(proto, []byte("HTTP/")) || len(rest) < 3 {
		return 0, fmt.Errorf("malformed HTTP status line %q", line)
	}
	code, err := strconv.Atoi(string(rest[:3]))
	if err != nil || code < 100 || code > 999 || (len(rest) > 3 && rest[3] != ' ') {
		return 0, fmt.Errorf("malformed HTTP status line %q", line)
	}
	return code, nil
}

// ctxErr prefers the context's reason (the probe timeout) to the
// deadline's bare i/o error it caused.
func ctxErr(ctx context.Context, err error) error {
	if cerr := context.Cause(ctx); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}
