// Package profiling takes pprof CPU and heap profiles of the daemon in a
// timed window, for the footprint work of issue 19 (bench/README.md,
// "Footprint profile"). It is compiled in only with the build tag
// `pprof` (`GOFLAGS=-tags=pprof`): the shipped binary has neither
// runtime/pprof's code nor any way to switch it on, and a profiling build
// has no network endpoint either, only files in a directory root chose.
//
// With the tag, the daemon profiles when SURFLARE_WATCHDOG_PROFILE is set
// to DIR,DELAY,WINDOW (e.g. /tmp/prof,40s,60s): DELAY after the process
// starts it records the CPU for WINDOW, then writes DIR/cpu-PID.pprof and
// DIR/heap-PID.pprof (the heap at the window's end, after a GC) and
// DIR/heap-PID.txt (the same as text, with runtime.MemStats). A timed
// window, not a profile until exit, because the footprint figure is a
// steady window too and the daemon's start and stop would swamp it.
package profiling
