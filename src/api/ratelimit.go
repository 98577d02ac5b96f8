package api

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Failed-authentication limits per remote address: a burst of failBurst
// failures, then one more every failRefill. Ten guesses a minute against a
// 130-bit token is no attack, while a page reloaded with a stale token a
// few times is not locked out.
const (
	failBurst  = 10
	failRefill = 6 * time.Second
	// maxTracked bounds the limiter's memory; full buckets are forgotten
	// first, then (under a flood from many addresses) the oldest ones.
	maxTracked = 4096
)

// failLimiter is a token bucket per remote address that only failed
// authentications drain. An address with an empty bucket gets 429 for
// every request, valid token or not, so guessing learns nothing.
type failLimiter struct {
	now func() time.Time

	mu      sync.Mutex
	buckets map[netip.Prefix]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newFailLimiter(now func() time.Time) *failLimiter {
	return &failLimiter{now: now, buckets: make(map[netip.Prefix]*bucket)}
}

// limited reports whether key is out of attempts, and when the next one is
// allowed.
func (l *failLimiter) limited(key netip.Prefix) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		return false, 0
	}
	l.refillLocked(b)
	if b.tokens >= 1 {
		return false, 0
	}
	return true, time.Duration((1 - b.tokens) * float64(failRefill))
}

// fail records a failed attempt from key.
func (l *failLimiter) fail(key netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxTracked {
			l.evictLocked()
		}
		b = &bucket{tokens: failBurst, last: l.now()}
		l.buckets[key] = b
	}
	l.refillLocked(b)
	b.tokens = max(b.tokens-1, 0)
}

func (l *failLimiter) refillLocked(b *bucket) {
	now := l.now()
	b.tokens = level(b, now)
	b.last = now
}

// level is b's balance at now, without touching b.
func level(b *bucket, now time.Time) float64 {
	el := max(now.Sub(b.last), 0)
	return min(failBurst, b.tokens+float64(el)/float64(failRefill))
}

func (l *failLimiter) evictLocked() {
	now := l.now()
	var oldest netip.Prefix
	var oldestAt time.Time
	found := false
	for k, b := range l.buckets {
		if level(b, now) >= failBurst {
			delete(l.buckets, k)
			continue
		}
		if !found || b.last.Before(oldestAt) {
			oldest, oldestAt, found = k, b.last, true
		}
	}
	if found && len(l.buckets) >= maxTracked {
		delete(l.buckets, oldest)
	}
}

// clientKey is the remote address of r's connection, an IPv6 client by its
// /64 (one host usually owns the whole /64). Forwarding headers are ignored:
// the API is reached directly, and they would let a client pick its key.
func clientKey(remoteAddr string) netip.Prefix {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.Prefix(64)
	return p
}
