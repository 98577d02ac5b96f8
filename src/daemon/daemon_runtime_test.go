package daemon

import (
	"log/slog"
	"runtime/debug"
	"testing"
)

// The daemon runs under a soft memory limit sized for a router, and a
// GOMEMLIMIT given in the service's environment wins over it.
func TestMemoryLimitDefaultAndOverride(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	log := slog.New(slog.DiscardHandler)

	t.Setenv("GOMEMLIMIT", "")
	debug.SetMemoryLimit(1 << 40)
	setMemoryLimit(log)
	if got := debug.SetMemoryLimit(-1); got != defaultMemoryLimit {
		t.Fatalf("limit %d without GOMEMLIMIT, want %d", got, defaultMemoryLimit)
	}

	t.Setenv("GOMEMLIMIT", "64MiB")
	debug.SetMemoryLimit(64 << 20) // what the runtime read from it at start
	setMemoryLimit(log)
	if got := debug.SetMemoryLimit(-1); got != 64<<20 {
		t.Fatalf("limit %d with GOMEMLIMIT=64MiB, want the environment's", got)
	}
}
