package firewall

import (
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// routeGroups are the rtnetlink multicast groups whose messages announce a
// change to what the routing layer reads or owns (permit.go's layerSpec
// and SetLayer): links, the addresses of the LAN and the WAN, routes
// (default routes, the layer's table) and ip rules, IPv4 and IPv6.
const routeGroups = unix.RTMGRP_LINK |
	unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR |
	unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE |
	unix.RTMGRP_IPV4_RULE | 1<<(unix.RTNLGRP_IPV6_RULE-1)

// routeMonitor counts rtnetlink change messages (f.rtEvents) while it
// runs, so Guard's idle passes skip the routing layer's netlink reads too
// when nothing announced a change since a clean pass (issue 19: those
// reads were the guard's remaining cost, every 5 s). A lost message
// (ENOBUFS: the socket overran) counts as a change; a monitor that stops
// clears f.rtMonitoring, and Guard then checks the routing layer on every
// pass, as it did before. stop ends it and waits for it.
func (f *Firewall) routeMonitor() (stop func(), err error) {
	cfg := &netlink.Config{Groups: routeGroups}
	if f.netnsFD >= 0 {
		cfg.NetNS = f.netnsFD
	}
	c, err := netlink.Dial(unix.NETLINK_ROUTE, cfg)
	if err != nil {
		return nil, fmt.Errorf("joining the rtnetlink event groups: %w", err)
	}
	f.rtEvents.Add(1) // events may have been lost before we joined
	f.rtMonitoring.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			f.rtMonitoring.Store(false)
			f.rtEvents.Add(1)
		}()
		for {
			_, err := c.Receive()
			f.rtEvents.Add(1)
			if err == nil {
				continue
			}
			var oe *netlink.OpError
			if errors.As(err, &oe) && errors.Is(oe.Err, unix.ENOBUFS) {
				continue // overrun: counted as a change, the socket goes on
			}
			return // closed, or broken
		}
	}()
	return func() {
		f.rtMonitoring.Store(false)
		f.rtEvents.Add(1)
		c.Close()
		<-done
	}, nil
}

// withGuardFullEvery sets how many periodic passes Guard makes per full
// one (guardFullEvery): tests set it high, so only change events can have
// made a pass look.
func withGuardFullEvery(n int) Option { return func(f *Firewall) { f.guardFull = n } }

// RouteSkips is how many of Guard's idle passes skipped the routing layer
// too: no rtnetlink change since its last clean check (tests, status).
func (f *Firewall) RouteSkips() int64 { return f.routeSkips.Load() }
