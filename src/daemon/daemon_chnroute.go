package daemon

import (
	"context"
	"net/http"
	"time"

	"surflare-watchdog/src/chnroute"
	"surflare-watchdog/src/config"
)

// chnrouteCountry is the registry country whose prefixes go direct.
const chnrouteCountry = "CN"

// chnrouteFetchTimeout bounds one download of the delegated file (a few MB).
const chnrouteFetchTimeout = 2 * time.Minute

// startChnroute runs the chnroute refresher for config c: every
// paths.chnroute_refresh (weekly by default; 0 = never) it downloads
// paths.chnroute_url, writes the two lists and re-applies the firewall
// with them. The interval and URL are the ones at startup; a reload that
// changes them takes effect at the next restart.
func (d *Daemon) startChnroute(ctx context.Context, c *config.Config) {
	r := &chnroute.Refresher{
		Interval: c.Paths.ChnrouteRefresh,
		Out4:     c.Paths.ChnrouteV4,
		Out6:     c.Paths.ChnrouteV6,
		Fetch:    chnroute.APNICFetcher(&http.Client{Timeout: chnrouteFetchTimeout}, c.Paths.ChnrouteURL, chnrouteCountry),
		OnUpdate: func(ctx context.Context, _ chnroute.Update) { d.chnrouteUpdated(ctx) },
	}
	d.goAux(ctx, "chnroute refresher", r.Run)
}

// chnrouteUpdated re-reads the chnroute files into the firewall's Spec and
// applies it; everything else in the Spec (learned relays, bypass
// addresses) stays as it is.
func (d *Daemon) chnrouteUpdated(ctx context.Context) {
	s, err := withChnroute(d.fw.Base(), d.cfgs.Get(), logWriter{d.log})
	if err != nil {
		d.log.Error("chnroute: reading the new lists failed; cn_direct unchanged", "err", err)
		return
	}
	if err := d.fw.SetBase(ctx, s); err != nil {
		d.log.Error("chnroute: applying the new lists failed", "err", err)
		return
	}
	d.log.Info("chnroute applied", "ipv4_prefixes", len(s.CNDirect4), "ipv6_prefixes", len(s.CNDirect6))
}
