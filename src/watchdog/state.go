package watchdog

import (
	"time"

	"surflare-watchdog/src/health"
	"surflare-watchdog/src/preflight"
)

// State is the watchdog's externally visible state, derived by nextState.
type State string

// States, in the priority order nextState checks them.
const (
	StateStarting     State = "starting"
	StateStopping     State = "stopping"
	StateStopped      State = "stopped"
	StateDiag         State = "diag"                  // tables stay, loop idles
	StateProbing      State = "probing"               // a node probe holds the vendor (LendVendor)
	StateFailOpen     State = "fail_open"             // kill switch dropped after auth failures
	StateBlocked      State = "blocked"               // a local cause (preflight) stops every node; wan_down for the WAN
	StateSubscription State = "subscription_inactive" // waiting out the 1 h cooldown
	StateAuthFailed   State = "auth_failed"           // fatal login error; needs the user
	StateCooldown     State = "storm_cooldown"        // every candidate failed
	StateWANDown      State = "wan_down"              // probing and rotation paused
	StateConnecting   State = "connecting"
	StateAuthWait     State = "auth_wait" // not connected, login in progress
	StateDisconnected State = "disconnected"
	StateDegraded     State = "degraded" // connected, failures below threshold
	StateHealthy      State = "healthy"
)

// facts are what the watchdog knows; State is a function of them.
type facts struct {
	started, stopping, stopped bool
	diag                       bool
	probing                    bool // LendVendor: a node probe holds the vendor
	wanDown                    bool // told by WANDown / hotplug
	wanDownProbed              bool // the last check found the WAN itself down
	connecting                 bool
	connected                  bool
	consecutiveFails           int
	cooldownUntil              time.Time
	auth                       authFacts
	// lanProxied: a connect verified the tunnel and sent the LAN into the
	// proxy; cleared when a connect starts, a storm cooldown begins or the
	// kill switch is dropped (firewallmode.go).
	lanProxied bool
	// adopting: startup found the whole tunnel a previous instance had
	// verified still in the kernel (adopt.go); the LAN stays in the proxy
	// while it is checked, instead of being reset for the look.
	adopting bool
	stopOpen bool         // the stop removes the kill switch too (--open-on-exit)
	pre      blockerFacts // what the last preflight found (preflight.go)
}

// authFacts are the authentication half of the facts.
type authFacts struct {
	needed            bool // status said log in
	running           bool // login worker active
	checking          bool // background status check in flight
	fatal             bool
	lastError         string
	failures          int // failed login attempts since the last success
	failOpen          bool
	subscriptionUntil time.Time
}

// nextState is the one place State is decided.
func nextState(f facts, now time.Time) State {
	switch {
	case f.stopped:
		return StateStopped
	case f.stopping:
		return StateStopping
	case !f.started:
		return StateStarting
	case f.diag:
		return StateDiag
	case f.probing:
		return StateProbing
	case f.auth.failOpen:
		return StateFailOpen
	case f.pre.blocked() && !f.connected:
		if f.pre.blocker.Check == preflight.CheckWAN {
			return StateWANDown // the name users know for it, paused in the history
		}
		return StateBlocked
	case now.Before(f.auth.subscriptionUntil):
		return StateSubscription
	case f.auth.fatal && !f.connected:
		return StateAuthFailed
	case now.Before(f.cooldownUntil):
		return StateCooldown
	case f.wanDown || f.wanDownProbed:
		return StateWANDown
	case f.connecting:
		return StateConnecting
	case !f.connected && (f.auth.needed || f.auth.running):
		return StateAuthWait
	case !f.connected:
		return StateDisconnected
	case f.consecutiveFails > 0:
		return StateDegraded
	default:
		return StateHealthy
	}
}

// Transition is one state change.
type Transition struct {
	At     time.Time `json:"at"`
	From   State     `json:"from"`
	To     State     `json:"to"`
	Reason string    `json:"reason,omitempty"`
}

// Counters are cumulative since start, except the consecutive ones.
type Counters struct {
	Checks              int `json:"checks"`
	FailedChecks        int `json:"failed_checks"`
	ConsecutiveFailures int `json:"consecutive_failures"`
	FailThreshold       int `json:"fail_threshold"`
	ConnectAttempts     int `json:"connect_attempts"`
	FailedReconnects    int `json:"failed_reconnects"` // consecutive
	Rotations           int `json:"rotations"`
	TransitSwitches     int `json:"transit_switches"`
	Storms              int `json:"storms"`
	LoginAttempts       int `json:"login_attempts"`
	LoginFailures       int `json:"login_failures"` // since the last success
	DroppedEvents       int `json:"dropped_events"`
}

// Exit is where the tunnel comes out.
type Exit struct {
	IP      string `json:"ip,omitempty"`
	Country string `json:"country,omitempty"`
}

// AuthStatus is the authentication part of Status.
type AuthStatus struct {
	State             string     `json:"state"` // ok, checking, logging_in, failed, subscription_inactive, fail_open
	Failures          int        `json:"failures"`
	LastError         string     `json:"last_error,omitempty"`
	SubscriptionUntil *time.Time `json:"subscription_until,omitempty"`
	// Refresh is the proactive login refresh (refresh.go).
	Refresh *RefreshStatus `json:"refresh,omitempty"`
}

// Conditions are the watchdog's own flags plus the detectors' states (JSON
// "signals", which the UI reads).
type Conditions struct {
	Diag               bool            `json:"diag"`
	WANDown            bool            `json:"wan_down"`
	WANDownProbed      bool            `json:"wan_down_probed"`
	StormCooldownUntil *time.Time      `json:"storm_cooldown_until,omitempty"`
	RateLimitedUntil   *time.Time      `json:"rate_limited_until,omitempty"`
	Auth               AuthStatus      `json:"auth"`
	Detectors          []DetectorState `json:"detectors,omitempty"`
}

// CandidateStatus is one rotation candidate as the watchdog sees it.
type CandidateStatus struct {
	Node      string `json:"node"`
	Current   bool   `json:"current"`
	Failed    bool   `json:"failed"` // failed in the current cycle
	Dead      bool   `json:"dead"`   // log health says so (fresh data)
	LogErrors int    `json:"log_errors"`
	// LatencyMS is the median tunnel-probe latency of the last passing
	// check on this node (0: none yet).
	LatencyMS int64 `json:"latency_ms,omitempty"`
}

// Status is the snapshot served by `surflare-watchdog status --json`, ubus
// and the web UI, and written to the state file. Field names are stable.
type Status struct {
	State       State             `json:"state"`
	Node        string            `json:"node"`
	Transit     string            `json:"transit"`
	Mode        string            `json:"mode"`
	Exit        Exit              `json:"exit"`
	Counters    Counters          `json:"counters"`
	LastCheck   *health.Result    `json:"last_check,omitempty"`
	Conditions  Conditions        `json:"signals"`
	Candidates  []CandidateStatus `json:"candidates"`
	StartedAt   time.Time         `json:"started_at"`
	UptimeS     int64             `json:"uptime_s"`
	UpdatedAt   time.Time         `json:"updated_at"`
	Transitions []Transition      `json:"last_transitions"`
	// Why is the one line a person reads first (why.go).
	Why Why `json:"why"`
	// Preflight is the last run of the local checks (nil before the first).
	Preflight *preflight.Report `json:"preflight,omitempty"`
	// CheckIntervalS is the configured time between checks while healthy:
	// a last_check much older than this is stale.
	CheckIntervalS int64 `json:"check_interval_s"`
}

// Event is what subscribers receive.
type Event struct {
	Type string    `json:"type"` // EventTransition, EventHealth or EventLog
	At   time.Time `json:"at"`
	// Exactly one of these is set, matching Type.
	Transition *Transition    `json:"transition,omitempty"`
	Health     *health.Result `json:"health,omitempty"`
	Log        *LogLine       `json:"log,omitempty"`
	// Node and Transit are the tunnel the engine is on (or connecting to)
	// when the event is sent: how the detectors learn the current node
	// without calling back into the engine.
	Node    string `json:"-"`
	Transit string `json:"-"`
}

// Event types.
const (
	EventTransition = "transition"
	EventHealth     = "health"
	EventLog        = "log"
)

// LogLine is a user-facing log message, as written to the log.
type LogLine struct {
	Level   string `json:"level"`
	Message string `json:"message"`
	// Fields are the line's key=value attributes (err included), as the
	// log writes them.
	Fields map[string]string `json:"fields,omitempty"`
}
