// Package chnroute keeps the domestic routing data (the cn_direct prefix
// lists) fresh: a daemon timer downloads the registry's delegated file on a
// schedule (weekly by default, config paths.chnroute_refresh), writes both
// lists atomically and hands them to whoever re-applies the firewall. A
// failed or implausible download keeps the old data and says why: a router
// with a week-old list routes almost exactly as well; one with an empty list
// would send every domestic site through the tunnel.
package chnroute

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"surflare-watchdog/src/firewall"
)

// DefaultInterval is how often the lists are refreshed when the config does
// not say (APNIC publishes daily; allocations to one country change slowly).
const DefaultInterval = 7 * 24 * time.Hour

// DefaultRetry is the wait after a failed refresh (capped by the interval).
const DefaultRetry = time.Hour

// DefaultMinKeep refuses a new IPv4 list shorter than this fraction of the
// current one: a truncated download or a registry hiccup, not a real change.
const DefaultMinKeep = 0.5

// Fetcher downloads the current prefixes of both families.
type Fetcher func(ctx context.Context) (v4, v6 []netip.Prefix, err error)

// APNICFetcher fetches country's prefixes from an APNIC delegated-format URL
// (what `surflare-watchdog routes update` does).
func APNICFetcher(client *http.Client, url, country string) Fetcher {
	return func(ctx context.Context) ([]netip.Prefix, []netip.Prefix, error) {
		return firewall.FetchAPNIC(ctx, client, url, country)
	}
}

// Update is one successful refresh.
type Update struct {
	V4, V6 []netip.Prefix
	At     time.Time
}

// Refresher refreshes the chnroute files on a schedule. Set the fields, then
// call Run (the daemon's timer) or Refresh (an on-demand update).
type Refresher struct {
	// Interval between refreshes; 0 or less disables the timer (Run returns
	// at once), as chnroute_refresh 0 means "never".
	Interval time.Duration
	// RetryAfter is the wait after a failure (default DefaultRetry, at most
	// Interval).
	RetryAfter time.Duration
	// Out4 and Out6 are the files (config paths.chnroute_v4/v6). The age of
	// Out4 says when the last refresh was, across restarts.
	Out4, Out6 string
	// Fetch downloads the lists (required).
	Fetch Fetcher
	// OnUpdate is called after new lists are written (e.g. re-apply the
	// firewall spec); it may be nil.
	OnUpdate func(ctx context.Context, u Update)
	// MinKeep: see DefaultMinKeep (0 means the default; negative disables).
	MinKeep float64
	// Log is the subsystem logger (default: subsystem=chnroute).
	Log *slog.Logger

	mu sync.Mutex // one refresh at a time
}

func (r *Refresher) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.Default().With("subsystem", "chnroute")
}

func (r *Refresher) retryAfter() time.Duration {
	d := r.RetryAfter
	if d <= 0 {
		d = DefaultRetry
	}
	if r.Interval > 0 && d > r.Interval {
		d = r.Interval
	}
	return d
}

// Run refreshes the lists every Interval until ctx ends. The first refresh
// happens when the current file is Interval old (at once if it is missing);
// after a failure it retries after RetryAfter, keeping the old lists.
func (r *Refresher) Run(ctx context.Context) error {
	if r.Fetch == nil {
		return errors.New("chnroute refresher: no fetcher")
	}
	if r.Interval <= 0 {
		r.log().Info("chnroute refresh disabled (chnroute_refresh 0)")
		return nil
	}
	wait := r.dueIn(time.Now())
	for {
		if wait > 0 {
			r.log().Debug("next chnroute refresh", "in", wait.Round(time.Second))
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
		if _, err := r.Refresh(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			wait = r.retryAfter()
			r.log().Warn("chnroute refresh failed, keeping the current lists", "err", err, "retry_in", wait)
			continue
		}
		wait = r.Interval
	}
}

// dueIn is how long until the current lists are Interval old.
func (r *Refresher) dueIn(now time.Time) time.Duration {
	st, err := os.Stat(r.Out4)
	if err != nil {
		return 0
	}
	age := now.Sub(st.ModTime())
	if age < 0 { // clock stepped back (no RTC until NTP): count from now
		age = 0
	}
	if age >= r.Interval {
		return 0
	}
	return r.Interval - age
}

// Refresh downloads and writes the lists now. On any failure the current
// files stay as they are and the error says why.
func (r *Refresher) Refresh(ctx context.Context) (Update, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Fetch == nil {
		return Update{}, errors.New("chnroute refresher: no fetcher")
	}
	v4, v6, err := r.Fetch(ctx)
	if err != nil {
		return Update{}, fmt.Errorf("downloading: %w", err)
	}
	if len(v4) == 0 {
		return Update{}, errors.New("the download has no IPv4 prefixes")
	}
	if err := r.plausible(v4); err != nil {
		return Update{}, err
	}
	if err := firewall.WriteChnroute(r.Out4, v4); err != nil {
		return Update{}, err
	}
	if err := firewall.WriteChnroute(r.Out6, v6); err != nil {
		return Update{}, fmt.Errorf("IPv4 list updated, IPv6 list not: %w", err)
	}
	u := Update{V4: v4, V6: v6, At: time.Now()}
	r.log().Info("chnroute updated", "ipv4_prefixes", len(v4), "ipv6_prefixes", len(v6))
	if r.OnUpdate != nil {
		r.OnUpdate(ctx, u)
	}
	return u, nil
}

// plausible refuses a list much shorter than the one in place.
func (r *Refresher) plausible(v4 []netip.Prefix) error {
	keep := r.MinKeep
	if keep == 0 {
		keep = DefaultMinKeep
	}
	if keep < 0 {
		return nil
	}
	old, err := firewall.LoadChnroute(r.Out4)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		// A broken current file is no reason to keep it.
		return nil
	}
	if float64(len(v4)) < keep*float64(len(old)) {
		return fmt.Errorf("the download has %d IPv4 prefixes, the current list %d: refusing a list that much shorter (truncated download?)", len(v4), len(old))
	}
	return nil
}
