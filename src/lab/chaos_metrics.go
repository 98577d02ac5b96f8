package lab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// The chaos watcher reads the daemon's goroutine count from its own
// /metrics (go_goroutines, src/api/metrics_process.go), scraped as a
// router's Prometheus would: from the router, with the web token. /proc
// shows threads only, and the Go runtime keeps a handful of threads for
// any number of goroutines, so a goroutine leak would never show there.

// metricsScraper fetches /api/v1/metrics from inside the router.
type metricsScraper struct {
	l      *Lab
	url    string
	client *http.Client
	token  string
}

func newMetricsScraper(l *Lab) *metricsScraper {
	m := &metricsScraper{l: l, url: "http://" + netip.AddrPortFrom(LANRouter, LabWebPort).String() + "/api/v1/metrics"}
	m.client, _ = l.HTTPClient(RoleRouter, 2*time.Second)
	return m
}

// metric returns one unlabelled sample of the exposition.
func (m *metricsScraper) metric(ctx context.Context, name string) (float64, error) {
	if m.client == nil {
		return 0, fmt.Errorf("no client in the router namespace")
	}
	if m.token == "" {
		b, err := os.ReadFile(m.l.Path(dirConfig, "web.token"))
		if err != nil {
			return 0, err
		}
		m.token = strings.TrimSpace(string(b))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+m.token)
	resp, err := m.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("metrics: HTTP %d", resp.StatusCode)
	}
	return findMetric(io.LimitReader(resp.Body, 4<<20), name)
}

// findMetric reads the value of the unlabelled series name from a text
// exposition.
func findMetric(r io.Reader, name string) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), name+" ")
		if ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("metrics: no %s series", name)
}

// goroutines is the daemon's go_goroutines now, -1 if it did not answer.
func (w *chaosWatch) goroutines(ctx context.Context) int {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	v, err := w.metrics.metric(qctx, "go_goroutines")
	if err != nil {
		w.mu.Lock()
		w.scrapeFails++
		w.mu.Unlock()
		return -1
	}
	return int(v)
}
