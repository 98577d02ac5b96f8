package statusview

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// now is 10 s after the canned status's updated_at, 20 s after its check.
var now = time.Date(2026, 12, 1, 10, 1, 8, 0, time.UTC)

func canned(t *testing.T, edit func(map[string]any)) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("testdata/status.json")
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		b, _ = json.Marshal(m)
	}
	return b
}

func render(data json.RawMessage, o Options) string {
	var b bytes.Buffer
	Write(&b, data, now, o)
	return b.String()
}

// The why line comes first, then the summary with ages, then one line
// per candidate with its state and latency; codes stay out.
func TestCompactStatus(t *testing.T) {
	out := render(canned(t, nil), Options{Nodes: true})
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if want := "Kill switch on: no node works (tried 4); next try in 4 min"; lines[0] != want {
		t.Errorf("first line %q, want the daemon's why line %q", lines[0], want)
	}
	for _, re := range []string{
		`(?m)^state: +storm_cooldown, for 3 min$`,
		`(?m)^node: +Chicago \(transit auto, mode rule\)$`,
		`(?m)^exit: +198\.18\.20\.2 US, checked 20 s ago$`,
		`(?m)^WAN: +up on eth0 \(192\.0\.2\.10\)$`,
		`(?m)^login: +ok$`,
		`(?m)^last check: +20 s ago: the LAN's path into the tunnel is broken \(probe through the LAN path timed out\), took 5012 ms$`,
		`(?m)^nodes:$`,
		`(?m)^  Chicago +88 ms +in use, failing$`,
		`(?m)^  Los Angeles +42 ms +ready$`,
		`(?m)^  Dallas +- +failed$`,
		`(?m)^  Miami +- +failed \(7 errors in the proxy log\)$`,
		`(?m)^  Tokyo +- +skipped$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("no line matches %s in:\n%s", re, out)
		}
	}
	if len(lines) != 13 {
		t.Errorf("%d lines, want 13 (why, 6 summary lines, nodes: and 5 nodes):\n%s", len(lines), out)
	}
	if strings.Contains(out, "PROXY_BROKEN") || strings.Contains(out, "counters") || strings.Contains(out, "every candidate failed its check") {
		t.Errorf("codes or the long form leaked into the compact view:\n%s", out)
	}
	if strings.Contains(out, " \n") {
		t.Errorf("trailing spaces:\n%q", out)
	}
	// Without Nodes (the actions' answers): no table.
	if short := render(canned(t, nil), Options{}); strings.Contains(short, "Los Angeles") || strings.Count(short, "\n") != 7 {
		t.Errorf("without Nodes:\n%s", short)
	}
}

// Without a why field (an older daemon) the line is derived from state,
// node and exit; unknown and down values say so.
func TestDerivedWhyLineAndUnknowns(t *testing.T) {
	cases := []struct {
		edit func(map[string]any)
		want []string
	}{
		{func(m map[string]any) { delete(m, "why"); m["state"] = "healthy" },
			[]string{"Protected: traffic goes through Chicago, exit US\n"}},
		{func(m map[string]any) { delete(m, "why") },
			[]string{"Kill switch on: every node failed; next try in 3 min\n"}},
		{func(m map[string]any) {
			delete(m, "why")
			m["state"] = "wan_down"
			m["exit"] = map[string]any{}
			m["signals"].(map[string]any)["wan_down"] = true
			delete(m, "last_check")
		}, []string{"The internet uplink (WAN) is down", "\nexit:        unknown\n", "\nWAN:         DOWN on eth0", "\nlast check:  none yet\n"}},
	}
	for i, c := range cases {
		out := render(canned(t, c.edit), Options{})
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("case %d: no %q in:\n%s", i, w, out)
			}
		}
		if i < 2 && !strings.HasPrefix(out, c.want[0]) {
			t.Errorf("case %d: the why line is not first:\n%s", i, out)
		}
	}
}

// An answer that is not a status is shown in the long form, not dropped.
func TestNotAStatusFallsBack(t *testing.T) {
	if out := render(json.RawMessage(`{"done": true}`), Options{}); out != "done: yes\n" {
		t.Errorf("got %q", out)
	}
}

func TestAges(t *testing.T) {
	for d, want := range map[time.Duration]string{12 * time.Second: "12 s ago", 5 * time.Minute: "5 min ago", 3 * time.Hour: "3 h ago", 72 * time.Hour: "3 d ago", -time.Second: "0 s ago"} {
		if got := Ago(now.Add(-d), now); got != want {
			t.Errorf("Ago(%v) = %q, want %q", d, got, want)
		}
	}
	if Ago(time.Time{}, now) != "never" || In(now.Add(-time.Second), now) != "now" || In(now.Add(4*time.Minute), now) != "in 4 min" {
		t.Error("never / past / future")
	}
}

// In rule mode without a listed probe the exit is not judged: the exit
// line says so, so a domestic exit does not read as a leak (issue 18).
func TestExitNotJudgedShown(t *testing.T) {
	why := "not judged: in mode rule the vendor sends sites off its list direct, and no probe is marked as on it (probe.listed)"
	out := render(canned(t, func(m map[string]any) {
		m["last_check"].(map[string]any)["exit_check"] = why
	}), Options{})
	if !strings.Contains(out, "exit:") || !strings.Contains(out, "checked 20 s ago ("+why+")") {
		t.Errorf("exit line does not carry the reason:\n%s", out)
	}
	if out := render(canned(t, func(m map[string]any) {
		m["last_check"].(map[string]any)["exit_check"] = "judged on every probe"
	}), Options{}); strings.Contains(out, "judged") {
		t.Errorf("a judged exit needs no note:\n%s", out)
	}
}

// The login row says when the login was last refreshed and when the next
// refresh is due, and a failed refresh with its error; an older daemon's
// answer (no refresh field) keeps the plain row.
func TestLoginRefreshInLoginRow(t *testing.T) {
	last, next := now.Add(-4*time.Minute), now.Add(26*time.Minute)
	withRefresh := func(r map[string]any) func(map[string]any) {
		return func(m map[string]any) {
			m["signals"].(map[string]any)["auth"].(map[string]any)["refresh"] = r
		}
	}
	for _, c := range []struct {
		r    map[string]any
		want string
	}{
		{map[string]any{"interval_s": 1800, "last_at": last, "outcome": "ok", "next_at": next}, `(?m)^login: +ok; refreshed 4 min ago, next in 26 min$`},
		{map[string]any{"interval_s": 1800, "last_at": last, "outcome": "failed", "last_error": "surflare login failed (retryable): network error", "next_at": next},
			`(?m)^login: +ok; refresh FAILED 4 min ago: surflare login failed \(retryable\): network error, next in 26 min$`},
		{map[string]any{"interval_s": 1800, "next_at": next}, `(?m)^login: +ok; not refreshed yet, next in 26 min$`},
		{map[string]any{"interval_s": 0}, `(?m)^login: +ok; refresh off$`},
	} {
		out := render(canned(t, withRefresh(c.r)), Options{})
		if !regexp.MustCompile(c.want).MatchString(out) {
			t.Errorf("no line matches %s in:\n%s", c.want, out)
		}
	}
	if out := render(canned(t, nil), Options{}); !regexp.MustCompile(`(?m)^login: +ok$`).MatchString(out) {
		t.Errorf("without a refresh field:\n%s", out)
	}
}
