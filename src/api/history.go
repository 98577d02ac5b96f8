package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Historian is optionally implemented by a Backend that keeps the tunnel's
// health over time (package history): /api/v1/history serves it, with the
// strip already drawn, so this page and LuCI show one picture.
type Historian interface {
	// History returns the last span cut into buckets: a value that
	// marshals to an object with svg and summary members.
	History(ctx context.Context, span time.Duration, buckets int) (any, error)
}

// History query limits: a day at most (what the daemon keeps), and no more
// buckets than a wide screen has pixels to spare.
const (
	maxHistorySpan    = 24 * time.Hour
	minHistorySpan    = 5 * time.Minute
	maxHistoryBuckets = 288
)

// getHistory serves ?span=SECONDS&buckets=N (1 h in 60 buckets by default).
func (s *Server) getHistory(w http.ResponseWriter, r *http.Request) {
	h, ok := s.opts.Backend.(Historian)
	if !ok {
		s.writeError(w, http.StatusNotFound, "this watchdog keeps no history")
		return
	}
	span, buckets := time.Hour, 60
	q := r.URL.Query()
	if v := q.Get("span"); v != "" {
		n, err := strconv.Atoi(v)
		d := time.Duration(n) * time.Second
		if err != nil || d < minHistorySpan || d > maxHistorySpan {
			s.writeError(w, http.StatusBadRequest, fmt.Sprintf("span=%q: want seconds from %d to %d", v, int(minHistorySpan.Seconds()), int(maxHistorySpan.Seconds())))
			return
		}
		span = d
	}
	if v := q.Get("buckets"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxHistoryBuckets {
			s.writeError(w, http.StatusBadRequest, fmt.Sprintf("buckets=%q: want a number from 1 to %d", v, maxHistoryBuckets))
			return
		}
		buckets = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), backendTimeout)
	defer cancel()
	v, err := h.History(ctx, span, buckets)
	if err != nil {
		s.backendError(w, "history", err)
		return
	}
	s.writeJSON(w, http.StatusOK, v)
}
