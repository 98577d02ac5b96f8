package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"surflare-watchdog/src/lab/fakes"
)

// urltestLoop tests every node x transit pair every p.urltestEvery until
// ctx ends. Like sing-box, it logs failures at ERROR and nothing on success.
func (p *proxy) urltestLoop(ctx context.Context) {
	t := time.NewTicker(p.urltestEvery)
	defer t.Stop()
	for {
		p.urltestRound(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// transits are the urltest's transit choices: each relay, then auto.
func (p *proxy) transits() []string {
	var ts []string
	for _, r := range p.relays {
		ts = append(ts, r.Name)
	}
	return append(ts, fakes.TransitAuto)
}

// urltestRound runs one test per pair concurrently and waits for all.
func (p *proxy) urltestRound(ctx context.Context) {
	var wg sync.WaitGroup
	for _, node := range p.nodes {
		for _, transit := range p.transits() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				if err := p.urltestOne(ctx, node, transit); err != nil && ctx.Err() == nil {
					p.log.Error(rand.Uint32(), time.Since(start),
						fmt.Sprintf("outbound/urltest[%s via %s]: %v", node, transit, err))
				}
			}()
		}
	}
	wg.Wait()
}

// urltestOne fetches the urltest URL through node via transit. Its errors
// read like sing-box's: `Get "URL": context deadline exceeded` or
// `unexpected status: 503 Service Unavailable`.
func (p *proxy) urltestOne(ctx context.Context, node, transit string) error {
	ctx, cancel := context.WithTimeout(ctx, p.urltestTimeout)
	defer cancel()
	f := p.faults.Current()
	tr := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return p.openTunnel(ctx, f, node, transit, addr)
		},
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.urltestURL, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		var ue *url.Error
		if asURLError(err, &ue) && ctx.Err() != nil {
			// Report the deadline the way Go's client words it for sing-box.
			return &url.Error{Op: ue.Op, URL: ue.URL, Err: context.DeadlineExceeded}
		}
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("unexpected status: %s", resp.Status)
	}
	return nil
}

func asURLError(err error, ue **url.Error) bool {
	e, ok := err.(*url.Error)
	if ok {
		*ue = e
	}
	return ok
}
