package lab

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// watchdogCLI runs `surflare-watchdog CMD --run-dir <lab run> args…` in
// the router, as a user would, and returns its exit code and output.
func watchdogCLI(ctx context.Context, l *Lab, cmdName string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	argv := append([]string{l.DaemonBinary(), cmdName, "--run-dir", l.Path(dirRun)}, args...)
	cmd := l.CommandContext(ctx, RoleRouter, argv...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		code = -1
		errb.WriteString(err.Error())
	}
	return code, out.String(), errb.String()
}

// A typo in `rotate` costs the LAN nothing: an unknown name is refused
// with exit 1 and "did you mean" while a LAN client's fetches keep
// exiting at the node in use; a name typed as people do ("los angeles")
// is the node, and rotate says how the switch went; a switch to a node
// that is down goes back to the one that worked.
func TestRotateTyposCostTheLANNothing(t *testing.T) {
	l := upDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()
	st, err := l.WaitDaemon(ctx, 20*time.Second, func(s DaemonState) bool { return s.Healthy() && s.Node == "Dallas" })
	if err != nil {
		t.Fatalf("%v\n%s", err, st.Raw)
	}

	// The LAN client fetches all along the typos.
	var mu sync.Mutex
	var fetches int
	var bad []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			name, err := exitOf(ctx, l)
			mu.Lock()
			fetches++
			if err != nil || name != "Dallas" {
				bad = append(bad, name+" "+errString(err))
			}
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	for _, c := range []struct{ typed, says string }{
		{"Narnia", `unknown node "Narnia"; known nodes: Dallas, Los Angeles, Chicago, New York, Atlanta, Miami`},
		{"chicgo", `unknown node "chicgo": did you mean "Chicago"?`},
		{"Los Angelos", `did you mean "Los Angeles"?`},
	} {
		code, out, errOut := watchdogCLI(ctx, l, "rotate", c.typed)
		if code != 1 || out != "" || !strings.Contains(errOut, c.says) {
			t.Errorf("rotate %q: exit %d, stdout %q, stderr %q; want exit 1 saying %q", c.typed, code, out, errOut, c.says)
		}
	}
	time.Sleep(time.Second) // a dropped tunnel would show by now
	close(stop)
	<-done
	mu.Lock()
	if fetches < 5 || len(bad) > 0 {
		t.Errorf("LAN fetches during the typos: %d, failed or elsewhere: %q", fetches, bad)
	}
	mu.Unlock()
	after, err := l.DaemonStatus(ctx)
	if err != nil || after.Node != "Dallas" || !after.Healthy() || after.Counters.ConnectAttempts != st.Counters.ConnectAttempts ||
		after.Counters.Rotations != st.Counters.Rotations {
		t.Errorf("after the typos: %v, %s on %s, counters %+v (before %+v)", err, after.State, after.Node, after.Counters, st.Counters)
	}

	// As people type it: the node, and the CLI waits for the outcome.
	code, out, errOut := watchdogCLI(ctx, l, "rotate", "los angeles")
	if code != 0 || !strings.HasPrefix(out, "rotated to Los Angeles in ") {
		t.Errorf("rotate \"los angeles\": exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if name, err := waitClient(ctx, l, 10*time.Second, func(n string) bool { return n == "Los Angeles" }); err != nil {
		t.Errorf("after rotate \"los angeles\" the LAN exits at %q: %v", name, err)
	}
	code, out, _ = watchdogCLI(ctx, l, "check")
	if code != 0 || !strings.HasPrefix(out, "check passed: exit 198.18.20.2 (US) in ") {
		t.Errorf("check: exit %d, stdout %q", code, out)
	}

	// A switch to a node that is down goes straight back to the node
	// that worked, and says so with exit 1.
	if err := l.Fault(ctx, FaultNodeDown, true, "Chicago"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	code, out, errOut = watchdogCLI(ctx, l, "rotate", "chicago")
	t.Logf("rotate to a node that is down answered in %s: %q", time.Since(t0).Round(100*time.Millisecond), errOut)
	if code != 1 || out != "" || !strings.Contains(errOut, "could not switch to Chicago (") || !strings.HasSuffix(errOut, "); back on Los Angeles\n") {
		t.Errorf("rotate chicago (down): exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if name, err := waitClient(ctx, l, 5*time.Second, func(n string) bool { return n == "Los Angeles" }); err != nil {
		t.Errorf("after the failed switch the LAN exits at %q: %v", name, err)
	}
	if st, _ := l.DaemonStatus(ctx); st.Node != "Los Angeles" || st.Counters.FailedReconnects != 0 {
		t.Errorf("after the failed switch: %s on %s, %d failed reconnects", st.State, st.Node, st.Counters.FailedReconnects)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
