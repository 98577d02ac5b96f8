package nodeprobe

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"surflare-watchdog/src/health"
)

// maxBody bounds what one answer may make us read.
const maxBody = 64 << 10

// readyRetry is the pause between attempts while a switched node's proxy
// comes up.
const readyRetry = 200 * time.Millisecond

// measure fills r's timing and exit fields and returns the relay sockets
// seen while a probe connection was open.
func measure(ctx context.Context, o *Options, r *Result) []Socket {
	var socks []Socket
	var errs []string
	ok := true
	if o.TTFBURL != "" {
		t, err := parseTarget(o.TTFBURL)
		if err != nil {
			return fail(r, err.Error())
		}
		sampleKernel := func() {
			if o.Kernel == nil {
				return
			}
			if s, err := o.Kernel.RelaySockets(ctx); err == nil {
				socks = append(socks, s...)
			}
		}
		var cold, warm, setup []float64
		deadline := time.Now().Add(o.ReadyTimeout)
		for len(cold) < o.Samples {
			s, err := t.sample(ctx, o, sampleKernel)
			if err != nil {
				// The first answer may take a moment after a switch;
				// later failures are the node's.
				if len(cold) == 0 && time.Now().Before(deadline) && ctx.Err() == nil {
					select {
					case <-ctx.Done():
					case <-time.After(readyRetry):
					}
					continue
				}
				errs = append(errs, "ttfb: "+err.Error())
				ok = false
				break
			}
			r.HTTPStatus = s.status
			cold = append(cold, ms(s.cold))
			warm = append(warm, ms(s.warm))
			setup = append(setup, max(0, ms(s.cold-s.warm)))
		}
		r.Samples = len(cold)
		if len(cold) > 0 {
			c, w, l4 := median(cold), median(warm), median(setup)
			r.ColdTTFBMS, r.L7TTFBMS, r.L4RTTMS = &c, &w, &l4
			if r.HTTPStatus >= 400 {
				ok = false
				errs = append(errs, fmt.Sprintf("ttfb: HTTP %d from %s", r.HTTPStatus, t.host))
			}
		}
	}
	if o.EchoURL != "" {
		ip, country, err := echo(ctx, o)
		if err != nil {
			ok = false
			errs = append(errs, "exit: "+err.Error())
		}
		r.ExitIP, r.ExitCountry = ip, country
	}
	r.OK = ok
	r.Error = strings.Join(errs, "; ")
	return socks
}

func fail(r *Result, msg string) []Socket {
	r.OK, r.Error = false, msg
	return nil
}

// target is an http:// URL split for hand-written requests.
type target struct {
	host string // Host header
	addr string // host:port to dial
	path string
	tls  bool   // https: the cold request includes the TLS handshake
	name string // TLS server name
}

func parseTarget(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return target{}, fmt.Errorf("probe URL %q: not an absolute URL", raw)
	}
	t := target{host: u.Host, path: u.RequestURI(), name: u.Hostname()}
	port := u.Port()
	switch u.Scheme {
	case "http":
		if port == "" {
			port = "80"
		}
	case "https":
		t.tls = true
		if port == "" {
			port = "443"
		}
	default:
		return target{}, fmt.Errorf("probe URL %q: want http:// or https://", raw)
	}
	t.addr = net.JoinHostPort(u.Hostname(), port)
	return t, nil
}

// sample is one connection's two timed requests.
type sample struct {
	cold, warm time.Duration
	status     int
}

// sample opens a connection, times the first byte of a first and a second
// request on it, and calls during between the two (the tunnel is open then,
// so the proxy's relay connection for it is established).
func (t target) sample(ctx context.Context, o *Options, during func()) (sample, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*o.Timeout)
	defer cancel()
	t0 := time.Now()
	c, err := o.Dial(cctx, "tcp", t.addr)
	if err != nil {
		return sample{}, fmt.Errorf("connecting to %s: %w", t.addr, err)
	}
	defer c.Close()
	stop := context.AfterFunc(cctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if t.tls {
		tc := tls.Client(c, &tls.Config{ServerName: t.name})
		if err := tc.HandshakeContext(cctx); err != nil {
			return sample{}, fmt.Errorf("TLS with %s: %w", t.name, err)
		}
		c = tc
	}
	br := bufio.NewReader(c)
	var s sample
	var closing bool
	if s.cold, s.status, closing, err = t.roundTrip(c, br, t0); err != nil {
		return s, err
	}
	if closing {
		return s, fmt.Errorf("%s closes the connection after one answer: no warm request", t.host)
	}
	during()
	if s.warm, _, _, err = t.roundTrip(c, br, time.Now()); err != nil {
		return s, fmt.Errorf("second request: %w", err)
	}
	return s, nil
}

// roundTrip sends one GET and returns the time from start to the answer's
// first byte, its status and whether the server closes the connection.
func (t target) roundTrip(c net.Conn, br *bufio.Reader, start time.Time) (time.Duration, int, bool, error) {
	req := "GET " + t.path + " HTTP/1.1\r\nHost: " + t.host + "\r\nUser-Agent: surflare-watchdog-probe\r\nAccept: */*\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		return 0, 0, false, fmt.Errorf("sending the request: %w", err)
	}
	if _, err := br.Peek(1); err != nil {
		return 0, 0, false, fmt.Errorf("waiting for the answer: %w", err)
	}
	ttfb := time.Since(start)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		return 0, 0, false, fmt.Errorf("reading the answer: %w", err)
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	if err != nil {
		return 0, 0, false, fmt.Errorf("reading the answer: %w", err)
	}
	return ttfb, resp.StatusCode, resp.Close, nil
}

// echo asks the echo target where the tunnel comes out.
func echo(ctx context.Context, o *Options) (ip, country string, err error) {
	cl := &http.Client{Timeout: o.Timeout, Transport: &http.Transport{DialContext: o.Dial, DisableKeepAlives: true, Proxy: nil}}
	defer cl.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.EchoURL, nil)
	if err != nil {
		return "", "", fmt.Errorf("echo URL %q: %w", o.EchoURL, err)
	}
	req.Header.Set("User-Agent", "surflare-watchdog-probe")
	resp, err := cl.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return "", "", fmt.Errorf("reading the echo: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return "", "", fmt.Errorf("echo answered %s", resp.Status)
	}
	ip, country = parseExit(body)
	if ip == "" {
		return "", "", fmt.Errorf("echo answer has no address: %.80q", body)
	}
	return ip, country, nil
}

// parseExit reads an IP-echo answer (JSON or a bare address) or a CDN
// trace (ip=… / loc=… lines), with the health checks' parsers.
func parseExit(body []byte) (ip, country string) {
	if ip, country = health.ParseEcho(body); ip != "" {
		return ip, country
	}
	return health.ParseTrace(body)
}
