// Package bench is the benchmark behind `make bench`: how fast the watchdog
// detects and recovers from failures, how safe it is (leaked packets, false
// rotations) and how light (memory, CPU, child processes, binary and
// package size), measured on the lab and set against the seed design's
// parameters run in the same invocation.
//
// The work splits three ways:
//
//   - orchestration (bench.go, scenarios.go, experiments in leaks.go,
//     soak.go, footprint.go): fault scenarios run through the lab's
//     scenario runner (`surflare-lab scenario NAME --json`), the rest in
//     labs this package brings up itself;
//   - statistics and judgement (stats.go, targets.go): percentiles,
//     ours/baseline ratios and the targets (bench/README.md), each MET or MISSED —
//     never adjusted to make a figure pass;
//   - rendering (report.go, svg.go): results.md, results.json and a
//     hand-written latency.svg, with no dependencies.
//
// Rendering and statistics are pure and unit-tested without root; the
// experiments need root and the lab.
package bench
