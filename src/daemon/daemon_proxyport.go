package daemon

import (
	"context"

	"surflare-watchdog/src/procscan"
)

// proxyPort is health's view of the proxy's tproxy port: a proxy that runs
// but does not listen yet (E6: `connect --daemon` may return first) is not
// up, so the connect sequence's phase 1 keeps waiting for it, bounded by
// connect_local_timeout, instead of probing a closed port and blaming the
// node.
type proxyPort struct {
	scan procscan.Scanner
	port int
}

func (p proxyPort) ProxyListening(context.Context) (bool, error) {
	if p.port <= 0 {
		return true, nil
	}
	return p.scan.Listening(p.port)
}
