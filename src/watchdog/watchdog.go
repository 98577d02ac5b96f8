package watchdog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"surflare-watchdog/src/clock"
	"surflare-watchdog/src/health"
	"surflare-watchdog/src/preflight"
	"surflare-watchdog/src/runfiles"
)

// Errors returned by commands.
var (
	// ErrNotRunning: the command arrived before Run started or after it
	// ended.
	ErrNotRunning = errors.New("watchdog is not running")
	// ErrDiag: the command would change the tunnel while diag mode holds
	// everything still.
	ErrDiag = errors.New("diag mode is on; turn it off first")
	// ErrBlocked: a local cause (preflight) stops every node; trying one
	// would only mark it failed.
	ErrBlocked = errors.New("not trying nodes")
)

// Watchdog is the supervisor. Create it with New, start it with Run; every
// other method is safe to call from any goroutine.
type Watchdog struct {
	d     Deps
	clock clock.Clock
	log   *slog.Logger

	cmds     chan command
	events   chan any
	loopDone chan struct{} // closed when the loop stops reading events
	running  chan struct{} // closed when Run starts accepting commands

	mu          sync.Mutex // guards everything below
	s           Settings
	f           facts
	state       State
	node        string // current (or target) node
	transit     string // transit in use: Settings.Transit unless switched (see switchTransitLocked)
	lastGood    string // node of the last verified connection
	mem         memory // what the last-good file says
	exit        Exit
	counters    Counters
	lastCheck   *health.Result
	transitions []Transition
	startedAt   time.Time
	ispAddr     netip.Addr
	dirty       bool

	tried            map[string]bool // candidates that failed in this cycle
	triedTransit     map[string]bool // "NODE via TRANSIT" given up on by a transit switch in this cycle
	lastHealthyAt    time.Time       // last healthy check (or verified connect)
	logSince         time.Time       // start of the last storm cooldown: older urltest errors do not count
	stormAt          time.Time       // start of the current (or last) storm cooldown
	connectStartedAt time.Time       // start of the current connect attempt
	accountRetries   int             // consecutive "Account check failed" connects
	overridden       string          // node a 503 storm override already reconnected (rotate if it persists)
	attempts         int             // automatic connects since a tunnel last lasted, for the rate limit (origin)
	lastAttemptAt    time.Time       // the last of them
	rateLimitedUntil time.Time
	nextCheckAt      time.Time
	retryAt          time.Time
	retryNode        string
	retryReason      string
	retryUnlimited   bool   // the scheduled connect has its own backoff: no rate limit
	retryFrom        string // the scheduled connect is a rotation away from this node, held by the rate limit
	authRetryAt      time.Time
	lastHeartbeat    time.Time
	wanLogged        bool
	latency          map[string]int64 // node → median tunnel latency of its last passing check
	preflight        *preflight.Report
	preflightGen     int
	preflightAt      time.Time

	opCtx         context.Context // parent of every operation; cancelled on stop
	opCancel      context.CancelFunc
	ops           sync.WaitGroup
	checkGen      int
	checkInFlight bool
	checkStarted  time.Time // of the check in flight or last answered (corroborate.go: evidence as of then)
	checkCancel   context.CancelFunc
	vendorGen     int // connect and cooldown operations, one at a time
	vendorCancel  context.CancelFunc
	vendorDone    chan struct{}
	authGen       int
	authCancel    context.CancelFunc
	authDone      chan struct{}
	actions       []*userAction // user actions being played out (useraction.go)
	refresh       refreshState  // proactive login refresh (refresh.go)

	// checkBound tightens the probes of the check in flight when it becomes
	// a confirming one (promoteCheckLocked); checkConfirming says it is one.
	checkBound      *health.ProbeBound
	checkConfirming bool

	shutdown     bool
	shutdownOpen bool
	handover     bool // the stop leaves the tunnel to the next instance (adopt.go)

	subs    map[int]chan Event
	nextSub int
}

// command runs fn on the loop goroutine.
type command struct {
	fn    func() error
	reply chan error
}

// New checks the settings and returns a watchdog ready to Run.
func New(s Settings, d Deps) (*Watchdog, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("watchdog settings: %w", err)
	}
	if d.Vendor == nil || d.Firewall == nil || d.Prober == nil {
		return nil, errors.New("watchdog: Vendor, Firewall and Prober are required")
	}
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if s.MaxTransitions <= 0 {
		s.MaxTransitions = 20
	}
	w := &Watchdog{
		d:        d,
		clock:    d.Clock,
		log:      slog.Default().With("subsystem", "watchdog"),
		cmds:     make(chan command),
		events:   make(chan any),
		loopDone: make(chan struct{}),
		running:  make(chan struct{}),
		s:        s,
		state:    StateStarting,
		node:     s.Node,
		transit:  s.Transit,
		tried:    map[string]bool{},
		latency:  map[string]int64{},

		triedTransit: map[string]bool{},
		subs:         map[int]chan Event{},
	}
	if w.node == "" {
		w.node = s.candidates()[0]
	}
	w.counters.FailThreshold = s.FailThreshold
	return w, nil
}

// Run starts up (moat, crash cleanup, kill switch, ISP address), connects,
// and supervises until ctx ends or Shutdown is called; then it stops (see
// the package doc) and returns. A startup failure is returned after the
// stop sequence has run, with the kill switch left armed.
func (w *Watchdog) Run(ctx context.Context) error {
	w.mu.Lock()
	w.startedAt = w.clock.Now()
	w.opCtx, w.opCancel = context.WithCancel(context.WithoutCancel(ctx))
	w.mu.Unlock()

	plan, err := w.startup(ctx)
	if err != nil {
		if ctx.Err() != nil { // stopped during startup: a clean stop
			w.stop(ctx, false)
			return nil
		}
		w.log.Error("Startup failed", "err", err)
		w.stop(ctx, false)
		return err
	}
	w.mu.Lock()
	w.f.started = true
	node, why := plan.node, plan.why
	w.node = node
	if plan.adopt {
		w.adoptLocked(plan.vt)
	}
	w.mu.Unlock()
	w.startupPreflight(ctx)
	w.mu.Lock()
	w.preflightAt = w.clock.Now().Add(w.s.CheckInterval)
	switch {
	case plan.adopt:
		// Connected already: the tunnel was kept (adopt.go).
	case w.f.pre.blocked():
		// A local cause: no node is tried, none is marked failed; the
		// preflight runs again every CheckInterval and on `check`.
		w.logLocked(slog.LevelInfo, fmt.Sprintf("Starting with %s via %s once the router is ready: %s", node, w.transit, why))
	default:
		w.logLocked(slog.LevelInfo, fmt.Sprintf("Starting with %s via %s: %s", node, w.transit, why))
		w.startConnectLocked(w.node, "startup", byEngineUnlimited)
	}
	w.updateLocked("started")
	w.mu.Unlock()
	close(w.running)

	for {
		w.mu.Lock()
		if w.dirty {
			w.writeStateLocked()
		}
		wake := w.nextWakeLocked()
		w.mu.Unlock()
		var timer <-chan time.Time
		if !wake.IsZero() {
			timer = w.clock.After(max(0, wake.Sub(w.clock.Now())))
		}
		select {
		case <-ctx.Done():
			w.stop(ctx, false)
			return nil
		case c := <-w.cmds:
			w.mu.Lock()
			err := c.fn()
			w.mu.Unlock()
			c.reply <- err
		case ev := <-w.events:
			w.mu.Lock()
			w.handleEventLocked(ev)
			w.mu.Unlock()
		case r := <-w.d.Inbox.requests():
			w.mu.Lock()
			w.onCheckRequestLocked(r)
			w.mu.Unlock()
		case <-timer:
			w.mu.Lock()
			w.tickLocked()
			w.mu.Unlock()
		}
		w.mu.Lock()
		stop, open := w.shutdown, w.shutdownOpen
		w.mu.Unlock()
		if stop {
			w.stop(ctx, open)
			return nil
		}
	}
}

// do runs fn on the loop and returns its error.
func (w *Watchdog) do(ctx context.Context, fn func() error) error {
	select {
	case <-w.running:
	case <-w.loopDone:
		return ErrNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
	c := command{fn: fn, reply: make(chan error, 1)}
	select {
	case w.cmds <- c:
	case <-w.loopDone:
		return ErrNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-c.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send delivers an operation's result to the loop, or drops it once the
// loop has stopped listening.
func (w *Watchdog) send(ev any) {
	select {
	case w.events <- ev:
	case <-w.loopDone:
	}
}

// updateLocked re-derives the state and records a transition if it changed.
func (w *Watchdog) updateLocked(reason string) {
	w.dirty = true
	now := w.clock.Now()
	next := nextState(w.f, now)
	if next == w.state {
		return
	}
	t := Transition{At: now, From: w.state, To: next, Reason: reason}
	w.state = next
	w.transitions = append(w.transitions, t)
	if n := len(w.transitions) - w.s.MaxTransitions; n > 0 {
		w.transitions = append([]Transition(nil), w.transitions[n:]...)
	}
	w.log.Info(fmt.Sprintf("State: %s -> %s", t.From, t.To), "reason", reason)
	w.emitLocked(Event{Type: EventTransition, At: now, Transition: &t})
}

// logLocked writes a user-facing message to the log and to subscribers,
// with its attributes: the web log shows them as the log does.
func (w *Watchdog) logLocked(level slog.Level, msg string, args ...any) {
	w.log.Log(context.Background(), level, msg, args...)
	w.emitLocked(Event{Type: EventLog, At: w.clock.Now(), Log: &LogLine{Level: level.String(), Message: msg, Fields: logFields(args)}})
}

// logFields renders slog-style key/value arguments as strings.
func logFields(args []any) map[string]string {
	if len(args) == 0 {
		return nil
	}
	r := slog.NewRecord(time.Time{}, 0, "", 0)
	r.Add(args...)
	m := make(map[string]string, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.Resolve().String()
		return true
	})
	return m
}

// nextWakeLocked is the earliest moment something is due.
func (w *Watchdog) nextWakeLocked() time.Time {
	var t time.Time
	consider := func(x time.Time) {
		if !x.IsZero() && (t.IsZero() || x.Before(t)) {
			t = x
		}
	}
	if !w.f.started || w.f.stopping {
		return t
	}
	consider(w.f.cooldownUntil)
	consider(w.f.auth.subscriptionUntil)
	consider(w.authRetryAt)
	consider(w.preflightAt)
	consider(w.refreshWakeLocked())
	if !w.pausedLocked() {
		consider(w.retryAt)
		consider(w.nextCheckAt)
	}
	return t
}

// pausedLocked: diag mode, a WAN-down event or a node probe hold probing
// and rotation.
func (w *Watchdog) pausedLocked() bool { return w.f.diag || w.f.wanDown || w.f.probing }

// due reports whether t is set and has come.
func due(t, now time.Time) bool { return !t.IsZero() && !now.Before(t) }

// tickLocked runs whatever is due.
func (w *Watchdog) tickLocked() {
	now := w.clock.Now()
	if due(w.f.cooldownUntil, now) {
		w.endCooldownLocked()
	}
	if due(w.f.auth.subscriptionUntil, now) {
		w.f.auth.subscriptionUntil = time.Time{}
		w.logLocked(slog.LevelInfo, "Subscription cooldown over: checking the account again")
		w.scheduleConnectLocked(w.node, now, "subscription cooldown over")
		w.updateLocked("subscription cooldown over")
	}
	if due(w.authRetryAt, now) {
		w.authRetryAt = time.Time{}
		w.startAuthLocked()
	}
	if due(w.preflightAt, now) {
		w.runPreflightLocked()
	}
	w.maybeRefreshLocked()
	if w.pausedLocked() {
		return
	}
	if due(w.retryAt, now) {
		node, reason, o := w.retryNode, w.retryReason, byEngine
		if w.retryUnlimited {
			o = byEngineUnlimited
		}
		from := w.retryFrom
		w.retryAt, w.retryUnlimited, w.retryFrom = time.Time{}, false, ""
		if !w.f.connecting && w.canAutoConnectLocked(now) {
			if from != "" && from != node {
				w.countRotationLocked(from, node, reason)
			}
			w.startConnectLocked(node, reason, o)
		}
	}
	if due(w.nextCheckAt, now) {
		w.nextCheckAt = time.Time{}
		if w.f.connected && !w.f.connecting && !w.checkInFlight {
			w.startCheckLocked()
		}
	}
}

// canAutoConnectLocked: nothing forbids an automatic connect attempt now.
func (w *Watchdog) canAutoConnectLocked(now time.Time) bool {
	a := w.f.auth
	return w.f.started && !w.f.stopping && !w.pausedLocked() &&
		!now.Before(w.f.cooldownUntil) && !now.Before(a.subscriptionUntil) &&
		!a.fatal && !a.needed && !a.running && !a.failOpen && !w.f.pre.blocked()
}

func (w *Watchdog) scheduleConnectLocked(node string, at time.Time, reason string) {
	w.retryAt, w.retryNode, w.retryReason, w.retryUnlimited, w.retryFrom = at, node, reason, false, ""
}

// handleEventLocked dispatches an operation's result.
func (w *Watchdog) handleEventLocked(ev any) {
	switch e := ev.(type) {
	case checkDone:
		w.onCheckLocked(e)
	case connectDone:
		w.onConnectLocked(e)
	case cooldownEntered:
		w.onCooldownEnteredLocked(e)
	case statusDone:
		w.onStatusLocked(e)
	case loginAttempt:
		w.onLoginLocked(e)
	case loginRoundOver:
		w.onLoginRoundOverLocked(e)
	case preflightDone:
		w.onPreflightLocked(e)
	case refreshAttempt:
		w.onRefreshAttemptLocked(e)
	case refreshOver:
		w.onRefreshOverLocked(e)
	}
	w.dirty = true
}

// ISPAddr is the WAN address found at startup (invalid until then); wire it
// into health.Deps.ISPAddr.
func (w *Watchdog) ISPAddr() netip.Addr {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ispAddr
}

// writeStateLocked writes the status JSON to the state file, if configured.
func (w *Watchdog) writeStateLocked() {
	w.dirty = false
	if w.s.StateFile == "" {
		return
	}
	if err := runfiles.WriteJSON(w.s.StateFile, w.statusLocked()); err != nil {
		w.log.Warn("Writing the state file failed", "err", err)
	}
}
