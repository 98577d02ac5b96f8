// Package watchdog is the supervisor: it starts the tunnel, watches its
// health, rotates exit nodes, handles vendor authentication and stops
// cleanly, keeping the kill switch armed throughout so nothing leaks.
//
// # Shape
//
// One goroutine (Run) owns all state. Slow work — a health check, a connect
// sequence, the login worker — runs in its own goroutine and reports back as
// an event, so commands (check, rotate, diag, stop) are handled at once and
// authentication never blocks health checks. The externally visible State is
// never assigned directly: it is derived from the facts in one switch,
// nextState, after every event, and every change is recorded as a
// Transition, published to subscribers and written to the state file.
//
// Kernel and vendor access go through small interfaces (Vendor, Firewall,
// Prober, NodeHealth, ConnKiller, Network) that packages surflare, firewall,
// route, health and signals satisfy; cmd wires them. Tests use fakes and
// testing/synctest, so every timer runs on a virtual clock.
//
// # Rotation, cascade, storm and rate limit
//
// Candidates come from the config, in order. A rotation picks the next
// candidate after the current one that has not yet failed in the current
// cycle, skipping nodes whose log health (urltest errors of NODE via
// TRANSIT) is above the threshold, unless that data is stale. When every
// remaining candidate is marked dead, the one whose last urltest error is
// oldest is tried anyway: log health is evidence, not proof, and a node that
// just came back still has errors in its window.
//
// A cycle starts when a node fails and ends with the first healthy check.
// A connect attempt that does not reach a healthy data plane is a failed
// reconnect: the first is retried on the same node after the degraded
// interval, unless the proxy's urltest of that node failed during the
// attempt (then it is the node, and retrying only costs time); from the
// second consecutive failure on (CascadeAfter) the watchdog fast-rotates:
// each further failure moves to the next candidate at once.
//
// The data-plane proof of a new tunnel (Phase2Timeout, 60 s) is given up
// early when our probes have failed at least twice and the proxy's own
// urltest has failed on the node via the transit since the connect
// started: a node the proxy cannot reach will not come up within the
// minute, and waiting it out kept the LAN down for a minute per dead node
// the rotation tried (a node that died moments ago has too few urltest
// errors for log health to skip it). The Corroborator's evidence against
// the node gives it up the same way, without waiting for a urltest round
// (whose cadence is the vendor's): the proxy logging our probes'
// connections through the node as failed, the kernel's signs on its
// sockets, each counted only since the node came into use; such a give-up
// rotates at once ("Cascade: X via T failed its probes with evidence
// against it"). Without either the proof gets its whole timeout, as in
// the seed.
//
// "Account check failed" from `surflare connect` means the vendor could not
// reach its account API: the node is not to blame. It is not counted as a
// failed reconnect, the node is not marked failed and nothing rotates; the
// same node is retried after AccountRetryMin, doubling up to
// AccountRetryMax (3, 6, 12 … 60 s), with the kill switch armed
// ("Account API unreachable: retrying Dallas in 6s"). These retries have
// their own backoff and are not counted by the reconnect rate limit.
//
// # Local causes (preflight)
//
// Some faults are the router's, not a node's: no vendor client at
// paths.surflare_bin, no account, no default route on the WAN, a kernel
// without the modules the LAN tables need (Deps.Preflight, package
// preflight). Trying nodes then only marks healthy nodes failed and uses
// up the reconnect budget — a router without /usr/bin/surflare once tried
// all six nodes in ten seconds. So the preflight's first blocker is a
// fact, and nextState derives the state "blocked" from it while the tunnel
// is not up ("wan_down" when the cause is the WAN, the name users know): no connect starts (automatic or requested: rotate and
// reconnect are refused with ErrBlocked), no node is marked failed, no
// attempt is counted, nothing cascades, and the kill switch stays armed
// (blocked = offline, nothing leaks). The preflight runs before the first
// connect, every CheckInterval, at once on `check` and after a reload;
// when the blocker is gone the watchdog connects ("Preflight clear: …").
// A blocker that appears while the tunnel works changes nothing until the
// tunnel drops. The log says "Not connecting: <why> — <fix>" once per
// cause, with the check and the raw error as fields.
//
// One exception keeps a new router usable: when the account or the client
// is missing and this router never had a working tunnel (no last good node
// in the memory file), the firewall is open (the fail-open mode: the
// client's download needs the Internet too) and the why line says so;
// setting both up re-arms the kill switch before the first connect, and a
// stop meanwhile leaves the LAN open too. A router that has worked before
// keeps the kill switch armed when either goes missing.
//
// # The why line
//
// Status.Why is the one line a person reads first (why.go), derived from
// the state like the state is from the facts: what is happening in plain
// words, a severity (ok, info, warn, action: only action asks the person
// to act), and the state, outcome and preflight codes in Detail.
//
// # Transit
//
// Settings.Transit is the default relay ("auto" lets the vendor pick);
// rotation is by node. Log health is per NODE via TRANSIT, so before a node
// is given up on (rotation or cascade) the transit is checked: when the
// node has urltest errors via the current transit since the tunnel last
// worked — for "auto", via a relay auto tries — and another known transit
// has none for it, the same node is reconnected via that transit ("Transit
// switch: Dallas via auto -> Dallas via Singapore"), each NODE via TRANSIT
// at most once per cycle; the fewest recent errors across the candidates
// win, then the default, then named relays before auto. Known transits are
// the default, Settings.Transits, and every transit log health has named
// (remembered in the memory file): the proxy logs only failures, so a relay
// that never failed is otherwise unknown. The switched transit stays for
// later rotations until a reload changes the configured one or a storm
// cooldown starts a fresh cycle on it. This needs a NodeHealth that also
// gives error times (PairReporter, as loghealth.Monitor does).
//
// # Restart memory
//
// The memory file (Settings.MemoryFile, <run_dir>/surflare_last_good.json,
// 0600, atomic; crash cleanup leaves it) holds the last node proven healthy
// with its transit and time, and the nodes that failed since. At startup,
// before crash cleanup stops it, the vendor's running tunnel is looked at
// (status and one check, within 5 s). The first node is: that tunnel's node
// if it is healthy; else the last good node if younger than StartMemory
// (1 h) and not failed since; else the configured node and candidates in
// order, without nodes that failed within StartMemory — always skipping
// nodes log health marks dead. The open cycle's failures carry over, so
// rotation and storm protection continue across a kill -9.
//
// When that tunnel is healthy, whole in the kernel (Deps.TunnelIntact) and
// on the node chosen anyway, it is adopted instead of reconnected: the
// tunnel-ending cleanup steps are skipped and the LAN never leaves the
// proxy (adopt.go). Handover is the stop for a restart that leaves the
// tunnel, the kill switch and the LAN tables to the next instance.
//
// The seed design had two storm rules that contradict each other: "N
// reconnects within the window means a storm: cool down" and "cool down when
// every candidate is exhausted". With 6 candidates and a limit of 6 the first
// rule could fire before the last candidate was tried, or never fire while a
// slow cycle continued indefinitely. This package uses one semantics:
//
//   - Storm protection fires on exactly one condition: every candidate has
//     failed in the current cycle. It logs "Storm protection triggered",
//     disconnects the vendor, keeps the kill switch armed and puts the
//     firewall in cooldown (domestic and bypassed traffic keep working), and
//     waits StormCooldown. Then it starts a fresh cycle on the configured
//     transit. The proxy was stopped during the cooldown, so urltest errors
//     whose last occurrence is older than the cooldown's start no longer
//     count: the cycle starts with the first candidate not failing since,
//     and skips the nodes that fail again. A user command (rotate,
//     reconnect, reload) ends the cooldown early, with the same rule.
//   - The reconnect rate limit never starts a cooldown and never resets a
//     cycle: it only delays the next automatic attempt. It counts automatic
//     attempts since a tunnel last lasted: the first ReconnectLimit go at
//     once, each after them waits a backoff after the last (ReconnectWindow
//     /20, doubling up to ReconnectWindow: 30 s, 1, 2, 4, 8, 10 min), the
//     habit of Kubernetes' CrashLoopBackOff (rateLimitEndsLocked). User
//     commands are neither rate limited nor counted: the budget is the
//     engine's own. A check that passes CheckInterval or more after the
//     tunnel's connect started ends the count (refundAttemptLocked): the
//     limit holds back loops of attempts that give no lasting tunnel, not
//     recoveries that worked. The WAN's return (hotplug ifup, the
//     preflight's WAN blocker clearing) ends it too (wanBackLocked):
//     attempts around an outage say nothing about the tunnel, and must not
//     hold back the next recovery.
//     A user's switch away from a working tunnel that fails on the new
//     node goes back to the old node at once instead of cascading, and an
//     unknown node name changes nothing (useraction.go).
//
// # Fast recovery
//
// The fail threshold (FailThreshold consecutive failed checks) protects
// against rotating on a blip; on its own it makes a dead node cost
// threshold x DegradedInterval. A failed check (not LOCAL_FAIL, which
// reconnects at once anyway, nor DOMESTIC_EXIT, which rotates at once) is
// treated as reaching the threshold when Deps.Corroborator names the
// current node broken by an independent, recent signal:
//
//   - the proxy's own urltest failed for the current node via the current
//     transit and via at least one more transit within the last 15 s,
//     while fewer than half of the other nodes failed via that transit
//     (if they did, the relay or the uplink is to blame, not the node);
//   - a burst of RSTs from the relays (the moat's rst_in counter jumped
//     well above its recent rate) within the last 15 s;
//   - the early detector's silent flows within the last 15 s: many of
//     the proxy's connections to the relays had their data acknowledged
//     by the relay and no answer for 1.5 s (the relay is alive, the exit
//     behind it is not: a node black-hole loses no segment, so the
//     kernel's cwnd/RTO/backoff signs never show it); or several of its
//     handshakes to the relays stuck in SYN_SENT after two SYN retries
//     while none of its established connections is answered;
//   - a burst of failed LAN connections through the node in use (the
//     proxy's failed-connection log lines: 3 within 10 s to at least 2
//     destinations), the same burst that asked for the check.
//
// The kernel's evidence (RSTs, silent flows, stalled handshakes) and the
// failed connections count for the node in use when they were seen: what
// happened on the node we left never corroborates a check on the next.
// Evidence the check itself can feed (AsOfCorroborator: the proxy logs the
// check's own probes as failed connections) counts as it stood when the
// check started, so one failed check is never its own corroboration. The
// idle probe's miss is such evidence too: one unanswered request through
// an idle tunnel, then the confirming check it asked for failing.
//
// Evidence alone never rotates (no failed check, no rotation), and a
// failed check without evidence waits for the threshold as before, so a
// lossy but working path does not rotate.
//
// A check started while the evidence already names the current node is a
// confirming check: its probes are bounded by ConfirmProbeTimeout (2 s)
// instead of the configured probe timeout (5 s). The evidence already
// counts as one failure; the check only has to show that the tunnel does
// not answer either, and a working tunnel answers in well under 2 s (a
// lost SYN still has room for one retransmission). On a black-holed path
// every probe runs into its timeout, so this is 3 s of every black-hole
// detection; a working tunnel passes the shorter check as it would the
// longer one. A check already running when the evidence arrives becomes a
// confirming one (promoteCheckLocked): its probes end ConfirmProbeTimeout
// after its own start. The early detector counts on that: it asks for a
// check on its first sight of acknowledged-but-unanswered flows, so the
// confirming check's 2 s overlap the 1.5 s those flows need to count as
// silent instead of following them. The signals that produce the
// evidence (package fastsignal) also ask for a check at once, together
// with the proxy's exit (pidfd) and jumps of the kill switch's drop
// counters, instead of waiting for the next CheckInterval. It logs
// "Fast recovery: failed check on X corroborated (...)".
//
// # 503 storm override (ADR-0001)
//
// When Deps.Override says a 503 storm is active (the proxy's urltest keeps
// getting 503 from the node in use) a check whose probes pass still counts
// as failed. The daemon's Override says so on either of two grounds: the
// count (storm503: Count 503s of the node in use within Window), or
// breadth — 503s from the node in use via at least two relays within the
// last 15 s while most other nodes answer — which is the same verdict
// from one urltest round instead of four (one relay's 503 could be the
// relay; every node's 503 would be the urltest target). Then: the first override reconnects the same node (a fresh connect
// often lands on another server of it); if the storm outlives that
// reconnect, the next override rotates away ("G2: 503 storm override").
//
// # Authentication
//
// Auth is reactive: `surflare status` is consulted before every connect and,
// in the background, after a failed health check. Login runs in a background
// worker with backoff LoginBackoffMin doubling up to LoginBackoffMax
// (3, 6, 12, 24, 48 s, capped at 60 s) for LoginRetries retries; after that
// the next round starts after LoginBackoffMax. Fatal errors (rate limited,
// bad credentials, expired plan, device limit, account check) stop retrying
// until the config is reloaded or the user asks for a reconnect. "subscription
// not active" starts a SubscriptionCooldown (1 h) without any login. Every
// failed login attempt counts towards the global failure count; when it
// reaches FailOpenAfter and FailOpen is enabled the kill switch is dropped
// so the household keeps internet access (the state says fail_open); with
// FailOpen disabled it stays closed. A later successful login re-arms it.
//
// Auth is also proactive (refresh.go, E9): where the account API answers
// only through the tunnel, a login after the tunnel is lost cannot work, so
// every LoginRefresh (30 min) the login is renewed while the tunnel is
// healthy, with the same backoff. A refresh never touches the tunnel and
// its failures are not login failures (no fail-open, no auth_failed): they
// are logged and shown in Status.Conditions.Auth.Refresh. When connects keep
// failing "Account check failed" (fallbackLoginAfter in a row) the same
// worker tries a direct login, at most every fallbackLoginEvery.
//
// # Stop
//
// Stop runs in this order: firewall teardown (the kill switch stays armed
// unless the stop was requested with open), vendor processes, a bounded wait
// for the auth worker, then the pid file/lock.
package watchdog
