//go:build pprof

package daemon

// A profiling build (GOFLAGS=-tags=pprof) profiles a timed window when
// SURFLARE_WATCHDOG_PROFILE says so; see src/profiling.
import _ "surflare-watchdog/src/profiling"
