package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Fetch is what a lab host saw when it fetched a URL.
type Fetch struct {
	Status  int           // HTTP status, 0 if no response
	Body    string        // response body (at most 64 KiB)
	Elapsed time.Duration // until the body was read or the error
	Err     error         // dial, reset, timeout… nil when a response came
}

// Echo is an IP-echo host's answer: the address it saw, i.e. the exit.
type Echo struct {
	IP      string `json:"ip"`
	Country string `json:"country"`
}

// maxBody bounds how much of a response Fetch keeps.
const maxBody = 64 << 10

// FetchFrom does an HTTP GET from inside a role's namespace (a LAN client
// or the router). The connection is made in-process by a thread that has
// joined the namespace, so it follows that namespace's routes and firewall
// exactly as a program running there would. No keep-alive: every fetch is
// a new connection, as a probe would be.
func (l *Lab) FetchFrom(ctx context.Context, role, url string) Fetch {
	return l.FetchHost(ctx, role, url, "")
}

// FetchHost is FetchFrom with the HTTP Host header set to host (when not
// ""): a client that resolved host to the URL's address itself, so the
// vendor's rule mode sees the name (E3).
func (l *Lab) FetchHost(ctx context.Context, role, url, host string) Fetch {
	ns, err := l.NS(role)
	if err != nil {
		return Fetch{Err: err}
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialIn(ctx, ns, network, addr)
		},
		DisableKeepAlives: true,
		Proxy:             nil,
	}
	defer tr.CloseIdleConnections()
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Fetch{Err: err}
	}
	if host != "" {
		req.Host = host
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return Fetch{Err: err, Elapsed: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return Fetch{Status: resp.StatusCode, Body: string(b), Err: err, Elapsed: time.Since(start)}
}

// ClientFetch is FetchFrom LAN client i.
func (l *Lab) ClientFetch(ctx context.Context, client int, url string) Fetch {
	if client < 0 || client >= len(l.clients) {
		return Fetch{Err: fmt.Errorf("lab %s has no client %d (it has %d)", l.Prefix, client, len(l.clients))}
	}
	return l.FetchFrom(ctx, l.clients[client].Role, url)
}

// ClientGet fetches url from LAN client i and returns the body; a non-2xx
// status is an error (carrying the body).
func (l *Lab) ClientGet(ctx context.Context, client int, url string) (string, error) {
	f := l.ClientFetch(ctx, client, url)
	if f.Err != nil {
		return f.Body, f.Err
	}
	if f.Status < 200 || f.Status > 299 {
		return f.Body, fmt.Errorf("GET %s from client %d: HTTP %d", url, client, f.Status)
	}
	return f.Body, nil
}

// EchoURL is the URL of IP-echo host i.
func EchoURL(i int) string { return "http://" + IPEcho[i%len(IPEcho)].String() + "/" }

// ClientEcho asks IP-echo host 0 from LAN client i which address (and so
// which exit) its request came from.
func (l *Lab) ClientEcho(ctx context.Context, client int) (Echo, error) {
	body, err := l.ClientGet(ctx, client, EchoURL(0))
	if err != nil {
		return Echo{}, err
	}
	return ParseEcho(body)
}

// ParseEcho decodes an IP-echo body.
func ParseEcho(body string) (Echo, error) {
	var e Echo
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.IP == "" {
		return Echo{}, fmt.Errorf("not an IP-echo answer: %q", truncate(body, 80))
	}
	return e, nil
}

// ExitName maps an echoed address to the exit node's name ("" if it is not
// an exit — e.g. the household's own WAN address).
func ExitName(ip string) string {
	for _, n := range Exits {
		if n.Addr.String() == ip {
			return n.Name
		}
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// HTTPClient is an HTTP client whose connections are made from inside a
// role's namespace (no keep-alive, no proxy), for requests FetchFrom does
// not cover: a LuCI JSON-RPC POST from a LAN client, the daemon's API.
func (l *Lab) HTTPClient(role string, timeout time.Duration) (*http.Client, error) {
	ns, err := l.NS(role)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialIn(ctx, ns, network, addr)
		},
		DisableKeepAlives: true,
		Proxy:             nil,
	}
	return &http.Client{Transport: tr, Timeout: timeout}, nil
}
