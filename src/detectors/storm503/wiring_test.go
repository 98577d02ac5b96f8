package storm503

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"surflare-watchdog/src/detectors/loghealth"
)

// The way cmd wires it: the log-health monitor's OnLine feeds 503 lines to
// the storm monitor. Twelve urltest 503s written to the proxy log within a
// minute trigger one immediate check; timeouts do not count.
func TestStormFromProxyLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		logPath := filepath.Join(dir, "surflare-proxy.log")
		os.WriteFile(logPath, nil, 0o644)
		triggered := make(chan string, 4)
		storm := New(Options{StateFile: filepath.Join(dir, "surflare_503_state"), Trigger: func(r string) { triggered <- r }})
		m, err := loghealth.NewMonitor(loghealth.Options{LogPath: logPath, Threshold: -1, OnLine: func(l loghealth.Line) {
			if l.Is503() {
				storm.Record(l.Time)
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go m.Run(ctx)

		f, _ := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
		defer f.Close()
		for i := range 12 {
			ts := time.Now().UTC().Format("-0700 2006-01-02 15:04:05")
			fmt.Fprintf(f, "%s ERROR [%d 0.4s] outbound/urltest[Miami via auto]: unexpected status: 503 Service Unavailable\n", ts, i)
			fmt.Fprintf(f, "%s ERROR [%d 5.0s] outbound/urltest[Dallas via auto]: context deadline exceeded\n", ts, i)
			time.Sleep(5 * time.Second)
			synctest.Wait()
		}
		select {
		case r := <-triggered:
			if !strings.HasPrefix(r, "503 storm: 10 urltest 503") {
				t.Errorf("reason %q", r)
			}
		default:
			t.Fatal("twelve 503s in a minute did not trigger")
		}
		if len(triggered) != 0 {
			t.Error("triggered more than once")
		}
		if !storm.OverrideActive(time.Now()) || storm.State(time.Now()).Count != 12 {
			t.Errorf("state %+v", storm.State(time.Now()))
		}
	})
}
