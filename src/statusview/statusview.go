// Package statusview renders the daemon's status answer for a person in a
// few lines, as `tailscale status` does: why things are as they are first,
// then the node, exit, WAN, login and last check, each value with its age,
// and one line per candidate node. The long key: value form of every field
// (control.WriteText) is what `status --verbose` shows; --json shows the
// answer as it came.
//
// It reads the status JSON by its stable field names and tolerates fields
// that are absent (an older daemon) or new (a newer one).
package statusview

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"surflare-watchdog/src/control"
)

// status is the part of the daemon's status answer this view shows.
type status struct {
	State   string `json:"state"`
	Why     *why   `json:"why"`
	Node    string `json:"node"`
	Transit string `json:"transit"`
	Mode    string `json:"mode"`
	Exit    struct {
		IP      string `json:"ip"`
		Country string `json:"country"`
	} `json:"exit"`
	Counters struct {
		ConsecutiveFailures int `json:"consecutive_failures"`
		FailThreshold       int `json:"fail_threshold"`
	} `json:"counters"`
	LastCheck *struct {
		Outcome    string    `json:"outcome"`
		Reason     string    `json:"reason"`
		At         time.Time `json:"at"`
		DurationMS int64     `json:"duration_ms"`
		ExitCheck  string    `json:"exit_check"`
	} `json:"last_check"`
	Signals struct {
		Diag               bool       `json:"diag"`
		WANDown            bool       `json:"wan_down"`
		StormCooldownUntil *time.Time `json:"storm_cooldown_until"`
		RateLimitedUntil   *time.Time `json:"rate_limited_until"`
		Auth               struct {
			State     string   `json:"state"`
			LastError string   `json:"last_error"`
			Refresh   *refresh `json:"refresh"`
		} `json:"auth"`
	} `json:"signals"`
	Candidates  []candidate `json:"candidates"`
	Transitions []struct {
		At time.Time `json:"at"`
		To string    `json:"to"`
	} `json:"last_transitions"`
	Daemon struct {
		WAN struct {
			Device string `json:"device"`
			Addr   string `json:"addr"`
		} `json:"wan"`
	} `json:"daemon"`
}

// refresh is the proactive login refresh (absent from older daemons).
type refresh struct {
	IntervalS int64      `json:"interval_s"`
	Running   bool       `json:"running"`
	LastAt    *time.Time `json:"last_at"`
	Outcome   string     `json:"outcome"`
	LastError string     `json:"last_error"`
	NextAt    *time.Time `json:"next_at"`
}

// text is the refresh in a few words, with its ages: what the login row
// adds after the login state.
func (r *refresh) text(now time.Time) string {
	switch {
	case r == nil:
		return ""
	case r.IntervalS <= 0:
		return "refresh off"
	}
	var parts []string
	switch {
	case r.Running:
		parts = append(parts, "refreshing now")
	case r.LastAt == nil:
		parts = append(parts, "not refreshed yet")
	case r.Outcome == "ok":
		parts = append(parts, "refreshed "+Ago(*r.LastAt, now))
	default:
		parts = append(parts, "refresh FAILED "+Ago(*r.LastAt, now)+": "+orDash(r.LastError))
	}
	if r.NextAt != nil && !r.Running {
		parts = append(parts, "next "+In(*r.NextAt, now))
	}
	return strings.Join(parts, ", ")
}

// why is the daemon's own one-line explanation of its state.
type why struct {
	Line     string `json:"line"`
	Severity string `json:"severity"`
	Detail   string `json:"detail"`
}

// candidate is one rotation candidate. State, Skipped and LatencyMS are
// shown when the daemon sends them.
type candidate struct {
	Node      string `json:"node"`
	State     string `json:"state"`
	Current   bool   `json:"current"`
	Failed    bool   `json:"failed"`
	Dead      bool   `json:"dead"`
	Skipped   bool   `json:"skipped"`
	LogErrors int    `json:"log_errors"`
	LatencyMS *int64 `json:"latency_ms"`
}

// Options choose what Write shows.
type Options struct {
	// Nodes adds the table of candidate nodes (status shows it; the
	// actions' short answers do not).
	Nodes bool
}

// Write prints the compact view of a status answer; ages are counted to
// now. An answer that is not a status object is shown in the long form.
func Write(w io.Writer, data json.RawMessage, now time.Time, o Options) {
	var s status
	if err := json.Unmarshal(data, &s); err != nil || s.State == "" {
		control.WriteText(w, data)
		return
	}
	fmt.Fprintln(w, s.whyLine(now))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range s.rows(now) {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	tw.Flush()
	if o.Nodes && len(s.Candidates) > 0 {
		fmt.Fprintln(w, "nodes:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, c := range s.Candidates {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Node, c.latency(), c.state())
		}
		tw.Flush()
	}
}

// whyLine is the daemon's why line when it sends one, else a plain line derived from the state, node and exit.
func (s status) whyLine(now time.Time) string {
	if s.Why != nil && s.Why.Line != "" {
		return s.Why.Line // its detail (codes, raw errors) is for --verbose
	}
	node := s.Node
	if node == "" {
		node = "no node"
	}
	switch s.State {
	case "healthy":
		line := "Protected: traffic goes through " + node
		if s.Exit.Country != "" {
			line += ", exit " + s.Exit.Country
		}
		return line
	case "degraded":
		return fmt.Sprintf("Degraded: %d of %d failed checks on %s before a reconnect",
			s.Counters.ConsecutiveFailures, s.Counters.FailThreshold, node)
	case "connecting", "auth_wait", "starting":
		return "Connecting to " + node + "; the kill switch holds traffic meanwhile"
	case "storm_cooldown":
		return "Kill switch on: every node failed; " + nextTry(now, s.Signals.StormCooldownUntil, s.Signals.RateLimitedUntil)
	case "wan_down":
		return "The internet uplink (WAN) is down; the watchdog waits for it"
	case "auth_failed", "subscription_inactive":
		return "Login refused: " + orDash(s.Signals.Auth.LastError) + "; see 'surflare-watchdog credentials status'"
	case "fail_open":
		return "Unprotected: the kill switch is off after login failures (fail_open)"
	case "diag":
		return "Diagnostic mode: supervision paused ('surflare-watchdog diag off' resumes it)"
	case "probing":
		return "Probing nodes; supervision resumes after the probe"
	}
	return "State: " + strings.ReplaceAll(s.State, "_", " ")
}

// nextTry says when the next connection attempt is, from the first of the
// times that is set.
func nextTry(now time.Time, times ...*time.Time) string {
	for _, t := range times {
		if t != nil && !t.IsZero() {
			return "next try " + In(*t, now)
		}
	}
	return "waiting"
}

// rows are the label/value lines under the why line.
func (s status) rows(now time.Time) [][2]string {
	var checkedAt time.Time
	if s.LastCheck != nil {
		checkedAt = s.LastCheck.At
	}
	node := orDash(s.Node)
	if s.Transit != "" || s.Mode != "" {
		node += " (transit " + orDash(s.Transit) + ", mode " + orDash(s.Mode) + ")"
	}
	exit := "unknown"
	if s.Exit.IP != "" || s.Exit.Country != "" {
		exit = strings.TrimSpace(s.Exit.IP + " " + s.Exit.Country)
		exit += ", checked " + Ago(checkedAt, now)
	}
	// In modes rule and direct the exit may be the ISP's by the vendor's
	// design; say so rather than let a domestic exit look like a leak.
	if lc := s.LastCheck; lc != nil && strings.HasPrefix(lc.ExitCheck, "not judged") {
		exit += " (" + lc.ExitCheck + ")"
	}
	wan := "up"
	if s.Signals.WANDown {
		wan = "DOWN"
	}
	if d := s.Daemon.WAN; d.Device != "" {
		wan += " on " + d.Device
		if d.Addr != "" && d.Addr != "invalid IP" {
			wan += " (" + d.Addr + ")"
		}
	}
	login := orDash(strings.ReplaceAll(s.Signals.Auth.State, "_", " "))
	if e := s.Signals.Auth.LastError; e != "" && s.Signals.Auth.State != "ok" {
		login += ": " + e
	}
	if r := s.Signals.Auth.Refresh.text(now); r != "" {
		login += "; " + r
	}
	check := "none yet"
	if lc := s.LastCheck; lc != nil {
		check = Ago(lc.At, now) + ": " + outcome(lc.Outcome)
		if lc.Reason != "" && lc.Outcome != "OK" {
			check += " (" + lc.Reason + ")"
		}
		if lc.DurationMS > 0 {
			check += fmt.Sprintf(", took %d ms", lc.DurationMS)
		}
	}
	// The state's name is what the docs' table of states and the log use.
	state := s.State
	if n := len(s.Transitions); n > 0 && s.Transitions[n-1].To == s.State {
		state += ", for " + span(max(now.Sub(s.Transitions[n-1].At), 0))
	}
	return [][2]string{{"state:", state}, {"node:", node}, {"exit:", exit}, {"WAN:", wan}, {"login:", login}, {"last check:", check}}
}

// outcome is a check's verdict in plain words; the code stays in --json.
func outcome(o string) string {
	switch o {
	case "OK":
		return "ok"
	case "TUNNEL_OK":
		return "ok through the tunnel (the LAN path was not tested)"
	case "DOMESTIC_EXIT":
		return "traffic came out in the home country, not through the VPN"
	case "PROXY_BROKEN":
		return "the LAN's path into the tunnel is broken"
	case "LOCAL_FAIL":
		return "the tunnel is not set up on this router"
	case "":
		return "-"
	}
	return strings.ToLower(strings.ReplaceAll(o, "_", " "))
}

// state is the candidate's column: in use, ready, failed or skipped.
func (c candidate) state() string {
	switch {
	case c.State != "":
		return strings.ReplaceAll(c.State, "_", " ")
	case c.Current && (c.Failed || c.Dead):
		return "in use, failing"
	case c.Current:
		return "in use"
	case c.Skipped:
		return "skipped"
	case c.Failed:
		return "failed"
	case c.Dead:
		return fmt.Sprintf("failed (%d errors in the proxy log)", c.LogErrors)
	}
	return "ready"
}

func (c candidate) latency() string {
	if c.LatencyMS == nil {
		return "-"
	}
	return fmt.Sprintf("%d ms", *c.LatencyMS)
}

// Ago is how long before now t was, for people: "12 s ago", "4 min ago",
// "3 h ago", "2 d ago"; "never" for the zero time.
func Ago(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	return span(d) + " ago"
}

// In is how long after now t is: "in 4 min" ("now" when it is past).
func In(t, now time.Time) string {
	d := t.Sub(now)
	if d <= 0 {
		return "now"
	}
	return "in " + span(d)
}

func span(d time.Duration) string {
	switch {
	case d < 2*time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	}
	return fmt.Sprintf("%d d", int(d.Hours()/24))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
