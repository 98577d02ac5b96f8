package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"surflare-watchdog/src/api"
)

// bodies are request bodies that make each command do something.
var bodies = map[string]string{
	"/api/v1/rotate": `{"node":"Los Angeles"}`,
	"/api/v1/diag":   `{"enable":false}`,
}

func TestPlantedSecretNeverInAResponse(t *testing.T) {
	f := newFixture(t, nil)
	ts := f.run(t)
	// The secret really is in what the backend hands the API, so this test
	// fails if redaction stops working.
	st, _ := f.fake.Status(context.Background())
	raw, _ := json.Marshal(st)
	if !strings.Contains(string(raw), "hunter2") {
		t.Fatalf("fake status does not carry the planted secret: %s", raw)
	}
	secretForms := []string{plantedSecret, "hunter2", func() string { b, _ := json.Marshal(plantedSecret); return string(b[1 : len(b)-1]) }()}
	check := func(where, body string) {
		t.Helper()
		for _, s := range append(secretForms, f.token) {
			if strings.Contains(body, s) {
				t.Errorf("%s contains %q:\n%s", where, s, body)
			}
		}
	}

	c, _, err := dialWS(ts, f.token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	check("websocket hello", string(readFrame(t, c).raw))

	// Every route, authenticated, twice (the second pass sees the events
	// and counters the first one caused), plus error answers.
	for pass := range 2 {
		for _, r := range routes(t, f.srv) {
			if r[1] == "/api/v1/ws" {
				continue
			}
			rec := f.do(r[0], r[1], f.token, bodies[r[1]], "127.0.0.1:1")
			if rec.Code >= 300 {
				t.Errorf("pass %d: %s %s: %d %s", pass, r[0], r[1], rec.Code, rec.Body)
			}
			check(r[0]+" "+r[1], rec.Body.String()+fmt.Sprint(rec.Header()))
		}
	}
	for _, bad := range []struct{ method, path, body string }{
		{"POST", "/api/v1/rotate", `{"node":"` + plantedSecret + `"}`}, // unknown node, echoed in the error
		{"POST", "/api/v1/diag", `{}`},
		{"GET", "/api/v1/nope", ""},
	} {
		rec := f.do(bad.method, bad.path, f.token, bad.body, "127.0.0.1:1")
		check(bad.method+" "+bad.path+" (error)", rec.Body.String())
	}
	// The rotation logged the "password" (apifake's careless log line);
	// the stream must not carry it.
	saw := readUntil(t, c, "the careless log line", func(fr frame) bool {
		return fr.Kind == api.KindLog && strings.Contains(string(fr.Data), "login prompt")
	})
	check("websocket log frame", string(saw.raw))
	for range 10 {
		check("websocket frame", string(readFrame(t, c).raw))
	}
}

func TestCommandsReachTheBackend(t *testing.T) {
	f := newFixture(t, nil)
	for _, c := range []struct{ path, body string }{
		{"/api/v1/check", ""},
		{"/api/v1/rotate", `{"node":"New York"}`},
		{"/api/v1/rotate", ""},
		{"/api/v1/reconnect", "{}"},
		{"/api/v1/diag", `{"enable":true}`},
	} {
		if rec := f.do("POST", c.path, f.token, c.body, "127.0.0.1:1"); rec.Code != http.StatusAccepted {
			t.Errorf("POST %s %s: %d %s", c.path, c.body, rec.Code, rec.Body)
		}
	}
	want := []string{"check", "rotate New York", "rotate ", "reconnect", "diag true"}
	if got := f.fake.Calls(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("backend calls %q, want %q", got, want)
	}
	var st struct{ Node, State string }
	json.Unmarshal(f.do("GET", "/api/v1/status", f.token, "", "127.0.0.1:1").Body.Bytes(), &st)
	if st.Node != "Dallas" || st.State != "diag" {
		// New York, then "next" wraps to Dallas (the fake has 4 nodes).
		t.Errorf("status after commands: %+v", st)
	}
}

func TestBadCommandsAreClientErrors(t *testing.T) {
	f := newFixture(t, nil)
	for _, c := range []struct {
		method, path, body string
		code               int
		msg                string
	}{
		{"POST", "/api/v1/rotate", `{"node":"Atlantis"}`, 400, "unknown node"},
		{"POST", "/api/v1/rotate", `{"nod":"Chicago"}`, 400, "unknown field"},
		{"POST", "/api/v1/rotate", `{"node":"a\u0000b"}`, 400, "printable"},
		{"POST", "/api/v1/rotate", `{"node":"` + strings.Repeat("x", 200) + `"}`, 400, "at most"},
		{"POST", "/api/v1/rotate", `{"node":"Chicago"} {}`, 400, "more than one"},
		{"POST", "/api/v1/rotate", `{"node":"` + strings.Repeat("x", 5000) + `"}`, 400, "too large"},
		{"POST", "/api/v1/diag", `{}`, 400, "enable"},
		{"POST", "/api/v1/diag", `{"enable":"yes"}`, 400, "body"},
		{"GET", "/api/v1/check", "", 405, "method"},
		{"POST", "/api/v1/status", "", 405, "method"},
		{"GET", "/api/v1/events?n=0", "", 400, "n="},
		{"GET", "/api/v1/missing", "", 404, "no such endpoint"},
	} {
		rec := f.do(c.method, c.path, f.token, c.body, "127.0.0.1:1")
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.msg) {
			t.Errorf("%s %s %.40s: %d %s, want %d with %q", c.method, c.path, c.body, rec.Code, rec.Body, c.code, c.msg)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s %s: Content-Type %q", c.method, c.path, ct)
		}
	}
	if calls := f.fake.Calls(); len(calls) != 1 || calls[0] != "rotate Atlantis" {
		t.Errorf("only the well-formed rotate should reach the backend: %q", calls)
	}
}

// Prometheus text format 0.0.4, checked line by line.
var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$`)
	labelPair  = regexp.MustCompile(`^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\[\\"n])*)"(,|$)`)
)

// parseExposition validates text and returns sample values by series.
func parseExposition(t *testing.T, text string) map[string]float64 {
	t.Helper()
	help, typ := map[string]bool{}, map[string]string{}
	closed := map[string]bool{}
	current := ""
	series := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# HELP "):
			f := strings.SplitN(line, " ", 4)
			if len(f) < 4 || !metricName.MatchString(f[2]) || help[f[2]] {
				t.Errorf("line %d: bad or repeated HELP: %q", n, line)
			}
			help[f[2]] = true
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Split(line, " ")
			if len(f) != 4 || !help[f[2]] || typ[f[2]] != "" {
				t.Errorf("line %d: TYPE without HELP before it, or repeated: %q", n, line)
			}
			if f[3] != "counter" && f[3] != "gauge" {
				t.Errorf("line %d: type %q", n, f[3])
			}
			if (f[3] == "counter") != strings.HasSuffix(f[2], "_total") {
				t.Errorf("line %d: counter names end in _total and only they: %q", n, line)
			}
			typ[f[2]] = f[3]
			if current != "" {
				closed[current] = true
			}
			current = f[2]
		case strings.HasPrefix(line, "#") || line == "":
			t.Errorf("line %d: unexpected %q", n, line)
		default:
			m := sampleLine.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("line %d: not a sample: %q", n, line)
				continue
			}
			if m[1] != current || closed[m[1]] {
				t.Errorf("line %d: sample of %s outside its family (TYPE first, samples together)", n, m[1])
			}
			for rest := m[3]; rest != ""; {
				lp := labelPair.FindStringSubmatch(rest)
				if lp == nil {
					t.Errorf("line %d: bad labels %q", n, m[3])
					break
				}
				rest = rest[len(lp[0]):]
			}
			v, err := strconv.ParseFloat(m[4], 64)
			if err != nil && m[4] != "+Inf" && m[4] != "-Inf" && m[4] != "NaN" {
				t.Errorf("line %d: value %q", n, m[4])
			}
			if math.IsNaN(v) {
				t.Errorf("line %d: NaN", n)
			}
			key := m[1] + m[2]
			if _, dup := series[key]; dup {
				t.Errorf("line %d: duplicate series %s", n, key)
			}
			series[key] = v
		}
	}
	return series
}

func TestMetricsExposition(t *testing.T) {
	f := newFixture(t, nil)
	ts := f.run(t)
	ctx := context.Background()
	f.fake.Check(ctx)
	f.fake.Break("Dallas")
	f.fake.Check(ctx)
	f.fake.Check(ctx) // second failure: rotates to Los Angeles
	f.srv.Publish(api.Event{Kind: "health", Data: map[string]string{"outcome": `weird"outcome\`}})

	req, _ := http.NewRequest("GET", ts.URL+"/api/v1/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+f.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q", ct)
	}
	var b strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&b)
	series := parseExposition(t, b.String())

	// The hub follows the fake asynchronously; the events counted by the
	// API may lag, the status-derived values may not.
	for key, want := range map[string]float64{
		`surflare_watchdog_up`:                     1,
		`surflare_watchdog_state{state="healthy"}`: 1,
		`surflare_watchdog_node_info{node="Los Angeles",transit="auto",mode="rule",exit_country="US"}`: 1,
		`surflare_watchdog_checks_total`:                                                      3,
		`surflare_watchdog_failed_checks_total`:                                               2,
		`surflare_watchdog_rotations_total`:                                                   1,
		`surflare_watchdog_candidate_dead{node="Dallas"}`:                                     1,
		`surflare_watchdog_last_check_outcome{outcome="PROXY_BROKEN"}`:                        1,
		`surflare_watchdog_probe_latency_seconds{probe="echo1",kind="ip-echo",path="tunnel"}`: 5,
		`surflare_watchdog_probe_success{probe="cdn1",kind="cdn-trace",path="tunnel"}`:        0,
		`surflare_watchdog_detections_total{outcome="weird\"outcome\\"}`:                      1,
	} {
		if got, ok := series[key]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", key, got, ok, want)
		}
	}
	if len(series) < 25 {
		t.Errorf("only %d series:\n%s", len(series), b.String())
	}
}

func TestMetricsWhenTheDaemonFails(t *testing.T) {
	f := newFixture(t, func(o *api.Options) { o.Backend = failing{o.Backend} })
	rec := f.do("GET", "/api/v1/metrics", f.token, "", "127.0.0.1:1")
	if rec.Code != http.StatusOK {
		t.Fatalf("metrics with a failing daemon: %d", rec.Code)
	}
	series := parseExposition(t, rec.Body.String())
	if series["surflare_watchdog_up"] != 0 {
		t.Errorf("up = %v, want 0", series["surflare_watchdog_up"])
	}
	if _, ok := series["surflare_watchdog_api_auth_failures_total"]; !ok {
		t.Error("API metrics missing when the daemon fails")
	}
	if rec := f.do("GET", "/api/v1/status", f.token, "", "127.0.0.1:1"); rec.Code != http.StatusInternalServerError ||
		!strings.Contains(rec.Body.String(), "daemon stopped") {
		t.Errorf("status with a failing daemon: %d %s", rec.Code, rec.Body)
	}
}

type failing struct{ api.Backend }

func (failing) Status(context.Context) (any, error) { return nil, fmt.Errorf("daemon stopped") }

func TestHistoryServesTheStrip(t *testing.T) {
	f := newFixture(t, nil)
	rec := f.do("GET", "/api/v1/history?span=3600&buckets=12", f.token, "", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("history: %d %s", rec.Code, rec.Body)
	}
	var v struct {
		SVG     string `json:"svg"`
		Summary string `json:"summary"`
		Buckets []any  `json:"buckets"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.SVG, "<svg") || !strings.HasPrefix(v.Summary, "Last hour") || len(v.Buckets) != 12 {
		t.Fatalf("history: svg %.40q summary %q buckets %d", v.SVG, v.Summary, len(v.Buckets))
	}
	for _, q := range []string{"span=10", "span=999999", "span=x", "buckets=0", "buckets=100000"} {
		if rec := f.do("GET", "/api/v1/history?"+q, f.token, "", ""); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d; want 400", q, rec.Code)
		}
	}
	if rec := f.do("GET", "/api/v1/history", "", "", ""); rec.Code != http.StatusUnauthorized {
		t.Errorf("without a token: %d", rec.Code)
	}
}
