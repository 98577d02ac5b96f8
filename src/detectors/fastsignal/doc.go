// Package fastsignal holds the watchdog's fast, cheap signals: the ones
// that make the engine check at once instead of waiting for the next
// periodic check, and the evidence that lets a single failed check count as
// enough to rotate.
//
//   - ProxyTracker keeps the proxy's pid(s) and learns of its death from a
//     pidfd (poll readiness through Go's netpoller: no thread, no polling),
//     so a crashed proxy is noticed at once. It also replaces the repeated
//     /proc scans of the daemon's proxy watch and the early detector's
//     sampler: /proc is scanned only while no proxy is known, when poked
//     (a connect started one) and every SafetyRescan (5 min).
//   - LogWatch keeps a short window (seconds, not the log-health window of
//     minutes) of urltest errors per node and says when the current node is
//     broken by the proxy's own tests: errors on the current pair, on at
//     least two of the node's pairs, while most other nodes via the same
//     transit are clean (so a dead relay or uplink is not blamed on the
//     node).
//   - CounterWatch reads named packet counters (the kill switch's drops,
//     the moat's RSTs from relays) and reports a jump: a delta well above
//     the counter's own recent rate. With the firewall's counter wake-up
//     (NFLOG) it reads only while they move (counterwake.go).
//   - Evidence combines LogWatch and CounterWatch into the engine's
//     corroboration (watchdog.Corroborator).
//
// Every signal only asks for a check (a trigger function, rate limited per
// source); it never rotates by itself. Rotation without the fail threshold
// needs a failed check AND evidence naming the current node (see package
// watchdog's doc, "Fast recovery").
package fastsignal
