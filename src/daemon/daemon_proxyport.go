package daemon

import (
	"context"
	"sync"

	"github.com/vishvananda/netns"

	"surflare-watchdog/src/procscan"
	"surflare-watchdog/src/route"
)

// proxyPort is health's view of the proxy's tproxy port: a proxy that runs
// but does not listen yet (E6: `connect --daemon` may return first) is not
// up, so the connect sequence's phase 1 keeps waiting for it, bounded by
// connect_local_timeout, instead of probing a closed port and blaming the
// node.
//
// It asks the kernel for listeners only (route.SockDiag.Listening), on one
// sock_diag socket shared by every checker the daemon builds (listenDiag,
// in nsProcs). Reading /proc/net/tcp and tcp6 instead, as procscan does,
// walks every TCP socket of the namespace at every check: ~10 ms a check
// in the lab, more on a router with a busy LAN. procscan is the fallback
// when the socket cannot be opened.
type proxyPort struct {
	scan procscan.Scanner
	diag *listenDiag
	port int
}

func (p proxyPort) ProxyListening(ctx context.Context) (bool, error) {
	if p.port <= 0 {
		return true, nil
	}
	if d := p.diag.get(); d != nil {
		if ok, err := d.Listening(ctx, uint16(p.port)); err == nil {
			return ok, nil
		}
	}
	return p.scan.Listening(p.port)
}

// listenDiag opens its sock_diag socket on first use, in the calling
// thread's namespace: the daemon's own, where the proxy listens (no
// goroutine that entered another namespace returns its thread unrestored,
// route.ProbeNS). It lives as long as the daemon; a failed open is not
// retried and leaves procscan's answer.
type listenDiag struct {
	once sync.Once
	d    *route.SockDiag
}

func (l *listenDiag) get() *route.SockDiag {
	if l == nil {
		return nil
	}
	l.once.Do(func() {
		if d, err := route.OpenSockDiag(netns.None()); err == nil {
			l.d = d
		}
	})
	return l.d
}

// close releases the socket (Run's end). Its once.Do orders it after an
// open in flight (and turns a later get into procscan's answer).
func (l *listenDiag) close() {
	if l == nil {
		return
	}
	l.once.Do(func() {})
	if l.d != nil {
		l.d.Close()
	}
}
