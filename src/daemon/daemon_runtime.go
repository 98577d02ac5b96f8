package daemon

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// defaultMemoryLimit is the Go runtime's soft memory limit (heap, stacks
// and the runtime's own structures) when GOMEMLIMIT sets none. An idle
// daemon's Go memory is about 7 MB (bench/README.md, "Footprint
// profile"); bursts — a chnroute reload, a full firewall batch, a
// rotation's probes — grow the heap, and on a router with 64–128 MB of RAM
// the GC had better collect sooner than let the heap double. The limit is
// soft: above it the GC works harder (at most about half a core) and the
// heap still grows, so it never makes the daemon fail. GOGC stays at its
// default: a lower one would cost CPU on every idle minute to save well
// under a megabyte. GOMEMLIMIT in the service's environment replaces this
// ("off" for none).
const defaultMemoryLimit = 16 << 20

// setMemoryLimit applies defaultMemoryLimit unless GOMEMLIMIT is set.
func setMemoryLimit(log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(defaultMemoryLimit)
	log.Debug("Go memory limit set", "bytes", defaultMemoryLimit)
}
