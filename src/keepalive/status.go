package keepalive

import (
	"encoding/json"
	"fmt"
	"time"
)

// Status is the clamp's state as `status`, ubus and the web view show it.
type Status struct {
	Active   bool          // the programs are attached to the proxy's cgroup
	Idle     time.Duration // configured TCP_KEEPIDLE
	Interval time.Duration // configured TCP_KEEPINTVL
	Count    int           // configured TCP_KEEPCNT
	Cgroup   string        // the proxy's cgroup2 group
	Capped   bool          // keepalive values the proxy sets itself are capped too
	Sockets  uint64        // connections clamped since New
	Failures uint64        // connections where the kernel refused an option
	// Reason says why the clamp is inactive ("keepalive clamp unavailable"
	// is implied), or, while active, what part of it is missing.
	Reason string
}

// MarshalJSON spells durations in seconds, as the config does.
func (s Status) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Active    bool   `json:"active"`
		IdleS     int64  `json:"idle_s"`
		IntervalS int64  `json:"interval_s"`
		Count     int    `json:"count"`
		Cgroup    string `json:"cgroup,omitempty"`
		Capped    bool   `json:"capped"`
		Sockets   uint64 `json:"sockets"`
		Failures  uint64 `json:"failures"`
		Reason    string `json:"reason,omitempty"`
	}{s.Active, int64(s.Idle / time.Second), int64(s.Interval / time.Second), s.Count,
		s.Cgroup, s.Capped, s.Sockets, s.Failures, s.Reason})
}

// String is the one-line summary for the CLI and the log.
func (s Status) String() string {
	if !s.Active {
		return "unavailable: " + s.Reason
	}
	out := fmt.Sprintf("active: idle=%v interval=%v count=%d cgroup=%s sockets=%d",
		s.Idle, s.Interval, s.Count, s.Cgroup, s.Sockets)
	if s.Failures > 0 {
		out += fmt.Sprintf(" failures=%d", s.Failures)
	}
	if s.Reason != "" {
		out += " (" + s.Reason + ")"
	}
	return out
}
