package daemon

import (
	"context"
	"net"
	"strconv"
	"testing"

	"surflare-watchdog/src/procscan"
)

// The proxy port's answer follows the listener, from sock_diag and, once
// that socket is closed, from procscan's /proc/net/tcp: the same answer
// either way.
func TestProxyPortFollowsTheListener(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	diag := &listenDiag{}
	p := proxyPort{scan: procscan.Scanner{}, diag: diag, port: port}
	if ok, err := p.ProxyListening(ctx); err != nil || !ok {
		t.Fatalf("listening on %d: ProxyListening = %v, %v", port, ok, err)
	}
	if diag.get() == nil {
		t.Fatal("no sock_diag socket: the answer came from procscan")
	}
	ln.Close()
	if ok, err := p.ProxyListening(ctx); err != nil || ok {
		t.Fatalf("listener closed: ProxyListening = %v, %v", ok, err)
	}
	ln, err = net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Skipf("port %d taken again: %v", port, err)
	}
	defer ln.Close()
	diag.close()
	if ok, err := p.ProxyListening(ctx); err != nil || !ok {
		t.Fatalf("sock_diag closed, procscan's answer: ProxyListening = %v, %v", ok, err)
	}
}
