package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxBody bounds what a probe reads: the answers are a few hundred bytes.
const maxBody = 16 << 10

// probe fetches t's URL along path and reads the exit from the answer.
func (c *Checker) probe(ctx context.Context, path Path, t Target) ProbeResult {
	r := ProbeResult{Name: t.Name, Kind: t.Kind, Path: path, Target: t.URL}
	if r.Name == "" {
		r.Name = string(t.Kind)
	}
	pctx, cancel := context.WithTimeout(ctx, c.probeTimeout(ctx))
	defer cancel()
	if b := ProbeBoundFrom(ctx); b != nil {
		var stop func()
		pctx, stop = b.bind(pctx)
		defer stop()
	}
	start := c.deps.Now()
	defer func() { r.LatencyMS = c.deps.Now().Sub(start).Milliseconds() }()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, t.URL, nil)
	if err != nil {
		r.Error = fmt.Sprintf("bad probe URL: %v", err)
		return r
	}
	req.Header.Set("User-Agent", "surflare-watchdog")
	resp, err := c.clients[path].Do(req)
	if err != nil {
		r.Error = shortErr(err)
		if errors.Is(context.Cause(pctx), errProbeBound) {
			r.Error = errProbeBound.Error()
		}
		return r
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	r.Status = resp.StatusCode
	if err != nil {
		r.Error = "reading answer: " + shortErr(err)
		return r
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		r.Error = "unexpected status: " + resp.Status
		return r
	}
	switch t.Kind {
	case KindCDNTrace:
		r.ExitIP, r.Country = ParseTrace(body)
	case KindIPEcho:
		r.ExitIP, r.Country = ParseEcho(body)
	}
	r.OK = true
	return r
}

// shortErr drops the URL Go repeats in every client error.
func shortErr(err error) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && strings.HasPrefix(err.Error(), "Get ") {
		if inner := ue.Unwrap(); inner != nil {
			return inner.Error()
		}
	}
	return err.Error()
}

// ParseTrace reads Cloudflare's /cdn-cgi/trace key=value lines (ip=…, loc=…):
// the one CDN-trace parser, for the health checks and the node probe.
func ParseTrace(body []byte) (ip, country string) {
	for _, line := range strings.Split(string(body), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "ip":
			if a, err := netip.ParseAddr(v); err == nil {
				ip = a.String()
			}
		case "loc":
			country = strings.ToUpper(v)
		}
	}
	return ip, country
}

// ParseEcho reads an IP-echo answer: JSON with an ip field and a country
// code under one of the names common services use, or a bare address.
func ParseEcho(body []byte) (ip, country string) {
	var m map[string]any
	if json.Unmarshal(body, &m) == nil {
		for _, k := range []string{"ip", "query", "address"} {
			if s, ok := m[k].(string); ok {
				if a, err := netip.ParseAddr(s); err == nil {
					ip = a.String()
					break
				}
			}
		}
		for _, k := range []string{"country", "country_code", "country_iso", "countryCode", "cc"} {
			if s, ok := m[k].(string); ok && len(s) == 2 {
				country = strings.ToUpper(s)
				break
			}
		}
		return ip, country
	}
	if a, err := netip.ParseAddr(strings.TrimSpace(string(body))); err == nil {
		ip = a.String()
	}
	return ip, country
}

// NewDialer returns a dialer whose sockets carry SO_MARK mark (0 = none) and,
// when device is set, are bound to that interface (SO_BINDTODEVICE). The
// daemon uses mark 0xff (the proxy's own bypass mark) bound to the WAN device
// for the egress check, so it leaves the router outside the tunnel like the
// proxy's own traffic does. Both options need CAP_NET_ADMIN/CAP_NET_RAW.
func NewDialer(mark uint32, device string) *net.Dialer {
	return &net.Dialer{
		Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				if mark != 0 {
					if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark)); serr != nil {
						serr = fmt.Errorf("setting SO_MARK %#x: %w", mark, serr)
						return
					}
				}
				if device != "" {
					if serr = unix.BindToDevice(int(fd), device); serr != nil {
						serr = fmt.Errorf("binding to %s: %w", device, serr)
					}
				}
			})
			return errors.Join(err, serr)
		},
	}
}
