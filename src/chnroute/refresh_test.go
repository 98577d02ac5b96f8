package chnroute

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"surflare-watchdog/src/firewall"
)

// fakeSource is a registry whose answer the test changes.
type fakeSource struct {
	mu    sync.Mutex
	calls int
	v4    []netip.Prefix
	err   error
}

func (f *fakeSource) fetch(ctx context.Context) ([]netip.Prefix, []netip.Prefix, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, nil, f.err
	}
	return f.v4, []netip.Prefix{netip.MustParsePrefix("2400:da00::/32")}, nil
}

func (f *fakeSource) set(v4 []netip.Prefix, err error) {
	f.mu.Lock()
	f.v4, f.err = v4, err
	f.mu.Unlock()
}

func (f *fakeSource) n() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func prefixes(n int) []netip.Prefix {
	var out []netip.Prefix
	for i := range n {
		out = append(out, netip.MustParsePrefix(fmt.Sprintf("1.%d.%d.0/24", i/256, i%256)))
	}
	return out
}

// syncBuffer is a log sink safe for the refresher's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newRefresher(t *testing.T, src *fakeSource) (*Refresher, *syncBuffer) {
	dir := t.TempDir()
	logs := &syncBuffer{}
	return &Refresher{
		Interval: DefaultInterval,
		Out4:     filepath.Join(dir, "chnroute.txt"),
		Out6:     filepath.Join(dir, "chnroute6.txt"),
		Fetch:    src.fetch,
		Log:      slog.New(slog.NewTextHandler(logs, nil)),
	}, logs
}

func lines(t *testing.T, path string) int {
	t.Helper()
	ps, err := firewall.LoadChnroute(path)
	if err != nil {
		t.Fatal(err)
	}
	return len(ps)
}

// A router without lists fetches at once, then weekly.
func TestRunFetchesAtOnceThenWeekly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeSource{v4: prefixes(10)}
		r, _ := newRefresher(t, src)
		var updates []Update
		r.OnUpdate = func(_ context.Context, u Update) { updates = append(updates, u) }
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		synctest.Wait()
		if src.n() != 1 || len(updates) != 1 || lines(t, r.Out4) != 10 || lines(t, r.Out6) != 1 {
			t.Fatalf("after start: %d fetches, %d updates; want 1 and both files written", src.n(), len(updates))
		}
		time.Sleep(DefaultInterval - time.Second)
		synctest.Wait()
		if src.n() != 1 {
			t.Fatalf("refreshed again after %v", DefaultInterval-time.Second)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if src.n() != 2 || len(updates) != 2 {
			t.Fatalf("a week later: %d fetches, want 2", src.n())
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// Lists six days old are refreshed one day after start, not at once: a
// reboot does not re-download.
func TestRunHonoursTheAgeOfTheCurrentList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeSource{v4: prefixes(10)}
		r, _ := newRefresher(t, src)
		if err := firewall.WriteChnroute(r.Out4, prefixes(10)); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-6 * 24 * time.Hour)
		if err := os.Chtimes(r.Out4, old, old); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go r.Run(ctx)
		time.Sleep(24*time.Hour - time.Minute)
		synctest.Wait()
		if src.n() != 0 {
			t.Fatalf("fetched %d times before the list was a week old", src.n())
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if src.n() != 1 {
			t.Fatalf("fetched %d times once the list was a week old, want 1", src.n())
		}
	})
}

// A failed download keeps the old lists, logs why, and is retried after an
// hour; the retry that works updates them.
func TestFailureKeepsOldDataAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &fakeSource{err: errors.New("fetching https://registry.example/x: 503 Service Unavailable")}
		r, logs := newRefresher(t, src)
		if err := firewall.WriteChnroute(r.Out4, prefixes(10)); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(r.Out4)
		old := time.Now().Add(-8 * 24 * time.Hour)
		os.Chtimes(r.Out4, old, old)
		updated := 0
		r.OnUpdate = func(context.Context, Update) { updated++ }
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go r.Run(ctx)
		synctest.Wait()
		after, _ := os.ReadFile(r.Out4)
		if src.n() != 1 || !bytes.Equal(before, after) || updated != 0 {
			t.Fatalf("failed refresh: %d fetches, file changed=%v, updates=%d", src.n(), !bytes.Equal(before, after), updated)
		}
		if l := logs.String(); !strings.Contains(l, "keeping the current lists") || !strings.Contains(l, "503 Service Unavailable") {
			t.Errorf("the log must say the old data is kept and why:\n%s", l)
		}
		src.set(prefixes(12), nil)
		time.Sleep(DefaultRetry + time.Second)
		synctest.Wait()
		if src.n() != 2 || updated != 1 || lines(t, r.Out4) != 12 {
			t.Fatalf("retry: %d fetches, %d updates, %d prefixes; want 2, 1, 12", src.n(), updated, lines(t, r.Out4))
		}
	})
}

func TestImplausiblyShortListIsRefused(t *testing.T) {
	src := &fakeSource{v4: prefixes(3)}
	r, _ := newRefresher(t, src)
	if err := firewall.WriteChnroute(r.Out4, prefixes(10)); err != nil {
		t.Fatal(err)
	}
	_, err := r.Refresh(t.Context())
	if err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Fatalf("a list of 3 replacing 10 must be refused, got %v", err)
	}
	if n := lines(t, r.Out4); n != 10 {
		t.Errorf("the current list was changed to %d prefixes", n)
	}
	src.set(nil, nil)
	if _, err := r.Refresh(t.Context()); err == nil {
		t.Error("an empty download must be refused")
	}
}

func TestDisabledRunReturns(t *testing.T) {
	src := &fakeSource{v4: prefixes(1)}
	r, _ := newRefresher(t, src)
	r.Interval = 0
	if err := r.Run(t.Context()); err != nil || src.n() != 0 {
		t.Errorf("interval 0: err %v, %d fetches; want nil and none", err, src.n())
	}
}

// The APNIC fetcher against a local delegated-format file.
func TestAPNICFetcher(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "2|apnic|20261129|3|19830613|20261128|+1000\n"+
			"apnic|CN|ipv4|1.0.1.0|256|20110414|allocated\n"+
			"apnic|JP|ipv4|1.0.16.0|4096|20110412|allocated\n"+
			"apnic|CN|ipv6|2400:da00::|32|20100719|allocated\n")
	}))
	defer srv.Close()
	src := &fakeSource{}
	r, _ := newRefresher(t, src)
	r.Fetch = APNICFetcher(srv.Client(), srv.URL, "CN")
	u, err := r.Refresh(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(u.V4) != 1 || u.V4[0].String() != "1.0.1.0/24" || len(u.V6) != 1 {
		t.Errorf("update %+v", u)
	}
}
