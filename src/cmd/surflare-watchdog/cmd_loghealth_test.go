package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/detectors/loghealth"
)

// urltestLine is an urltest error in the proxy's format, age ago.
func urltestLine(age time.Duration, node, transit, msg string) string {
	return fmt.Sprintf("%s ERROR [1820334452 2.1s] outbound/urltest[%s via %s]: %s\n",
		time.Now().Add(-age).UTC().Format("-0700 2006-01-02 15:04:05"), node, transit, msg)
}

func writeProxyLog(t *testing.T, dir string) string {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("+0000 2026-11-29 14:00:00 INFO started\n")
	for i := range 12 {
		sb.WriteString(urltestLine(time.Duration(i)*10*time.Second, "Los Angeles", "Tokyo", `Get "http://198.18.30.21/generate_204": context deadline exceeded`))
	}
	for range 3 {
		sb.WriteString(urltestLine(15*time.Minute, "Miami", "auto", "unexpected status: 503 Service Unavailable"))
	}
	sb.WriteString("\x00\x01\x02 binary junk\n")
	path := filepath.Join(dir, "surflare-proxy.log")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runLogHealth(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := logHealthMain(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestLogHealthTableAndFile(t *testing.T) {
	dir := t.TempDir()
	logPath := writeProxyLog(t, dir)
	outPath := filepath.Join(dir, "health.json")
	code, out, errs := runLogHealth("--config", filepath.Join(dir, "none"), "--log", logPath, "--out", outPath)
	if code != exitFailure || !strings.Contains(errs, "none") {
		t.Fatalf("an explicit missing --config: code %d, stderr %q; want a failure naming it", code, errs)
	}

	// Without --config, a missing default file means built-in defaults.
	code, out, errs = runLogHealthDefaults(t, "--log", logPath, "--out", outPath)
	if code != exitOK {
		t.Fatalf("code %d, stderr %s", code, errs)
	}
	for _, want := range []string{"Los Angeles via Tokyo", "12", "NO", "context deadline", "1 node/transit pairs with errors, 1 unhealthy", "1 garbage", "Wrote " + outPath} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Miami") {
		t.Errorf("15-minute-old errors shown with a 10-minute window:\n%s", out)
	}
	st, err := os.Stat(outPath)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", st.Mode().Perm())
	}
	s, err := loghealth.LoadNodeHealth(outPath, time.Now(), 20*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if dead, n := s.Dead("Los Angeles", "Tokyo"); !dead || n != 12 {
		t.Errorf("file: Los Angeles via Tokyo dead %v with %d, want dead with 12", dead, n)
	}

	// A wider window brings Miami in.
	code, out, _ = runLogHealthDefaults(t, "--log", logPath, "--out", "-", "--window-minutes", "20", "--json")
	var rep loghealth.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitOK {
		t.Fatalf("--json: code %d err %v\n%s", code, err, out)
	}
	if p := rep.Nodes["Miami via auto"]; p.ErrorCount != 3 || !p.UrltestHealthy || rep.WindowMinutes != 20 {
		t.Errorf("20-minute window: %+v (window %d)", p, rep.WindowMinutes)
	}
}

// runLogHealthDefaults runs log-health with --config pointing where the
// default would be on a machine without /etc/config/surflare.
func runLogHealthDefaults(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	if _, err := os.Stat("/etc/config/surflare"); err == nil {
		t.Skip("this machine has /etc/config/surflare; the defaults case cannot be tested here")
	}
	return runLogHealth(args...)
}

func TestLogHealthFromConfig(t *testing.T) {
	dir := t.TempDir()
	logPath := writeProxyLog(t, dir)
	cfg := filepath.Join(dir, "surflare")
	os.WriteFile(cfg, []byte(fmt.Sprintf("config paths 'paths'\n\toption proxy_log '%s'\n\toption run_dir '%s'\n\nconfig loghealth 'loghealth'\n\toption threshold '20'\n", logPath, dir)), 0o600)
	code, out, errs := runLogHealth("--config", cfg)
	if code != exitOK {
		t.Fatalf("code %d: %s", code, errs)
	}
	if !strings.Contains(out, "0 unhealthy") || !strings.Contains(out, filepath.Join(dir, "surflare_node_health.json")) {
		t.Errorf("threshold 20 and run_dir from the config not applied:\n%s", out)
	}
}

func TestLogHealthErrors(t *testing.T) {
	dir := t.TempDir()
	if code, out, _ := runLogHealth("--help"); code != exitOK || !strings.Contains(out, "-window-minutes") {
		t.Errorf("--help: code %d\n%s", code, out)
	}
	if code, _, _ := runLogHealth("--window-minutes", "x"); code != exitUsage {
		t.Errorf("bad flag: code %d, want %d", code, exitUsage)
	}
	code, _, errs := runLogHealthDefaults(t, "--log", filepath.Join(dir, "missing.log"), "--out", "-")
	if code != exitFailure || !strings.Contains(errs, "does not exist") {
		t.Errorf("missing log: code %d stderr %q", code, errs)
	}
}
