package watchdog

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"surflare-watchdog/src/procscan"
	"surflare-watchdog/src/runfiles"
)

func TestCrashCleanupOrderAndActions(t *testing.T) {
	// A stale proxy: a copy of sleep running under the proxy's name.
	src, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("needs sleep(1)")
	}
	data, _ := os.ReadFile(src)
	// A unique name: real lab proxies may run on this machine and must not
	// be killed by a test.
	name := fmt.Sprintf("sfp-%d", os.Getpid()%1000000)
	bin := filepath.Join(t.TempDir(), name)
	os.WriteFile(bin, data, 0o755)
	proxy := exec.Command(bin, "60")
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Process.Kill() })

	run := t.TempDir()
	for _, f := range runfiles.IPCFiles {
		os.WriteFile(filepath.Join(run, f), []byte("{}"), 0o600)
	}
	var order []string
	hook := func(name string) func(context.Context) error {
		return func(context.Context) error { order = append(order, name); return nil }
	}
	steps := CrashCleanup(CleanupHooks{
		ProxyName: name, RunDir: run,
		TombstonedTProxy: hook("tproxy"), OrphanedTrace: hook("trace"), FlushVendor: hook("vendor"),
		DNSEnforce: hook("dns"), StaleFwmarkRules: hook("fwmark"),
	})
	var names []string
	for _, s := range steps {
		names = append(names, s.Name)
		if err := s.Run(context.Background()); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
	wantNames := []string{"stale proxy holding the proxy port", "zombies", "tombstoned tproxy", "orphaned trace table",
		"stale IPC files", "flush vendor table", "dns_enforce", "stale fwmark rules"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("steps = %q, want %q", names, wantNames)
	}
	if !slices.Equal(order, []string{"tproxy", "trace", "vendor", "dns", "fwmark"}) {
		t.Errorf("hooks ran %q", order)
	}
	// Killed, and either already reaped by the zombie step or a zombie.
	deadline := time.Now().Add(3 * time.Second)
	for {
		p, err := (procscan.Scanner{}).Get(proxy.Process.Pid)
		if err != nil || p.Zombie() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("stale proxy survived crash cleanup")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The zombie step reaps a dead proxy child of ours.
	if err := steps[1].Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := (procscan.Scanner{}).Get(proxy.Process.Pid); err == nil {
		t.Error("zombie proxy not reaped")
	}
	for _, f := range runfiles.IPCFiles {
		if _, err := os.Stat(filepath.Join(run, f)); !os.IsNotExist(err) {
			t.Errorf("stale %s survives", f)
		}
	}
	if n := len(CrashCleanup(CleanupHooks{})); n != 2 {
		t.Errorf("without hooks %d steps, want the 2 process steps", n)
	}
}
