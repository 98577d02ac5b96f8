package watchdog

import (
	"errors"
	"fmt"
	"surflare-watchdog/src/config"
	"time"
)

// Settings are the engine's knobs; cmd fills them from package config.
// Durations are plain time.Duration so the engine does not depend on how
// the config spells them.
type Settings struct {
	Node       string   // preferred node, connected first
	Candidates []string // rotation order
	Transit    string   // "auto" or a relay name: the default
	// Transits are the relay names a transit switch may choose besides
	// Transit. The proxy logs only failures, so a relay that never failed
	// is unknown to log health; names seen there are learned anyway.
	Transits []string
	Mode     string // "rule" or "global"

	CheckInterval    time.Duration // between checks while healthy (30 s)
	DegradedInterval time.Duration // between checks after a failure (10 s)
	FailThreshold    int           // consecutive failed checks before rotating (4)
	// ConfirmProbeTimeout bounds each probe of a confirming check: one
	// started while Deps.Corroborator already names the current node
	// broken (2 s; never longer than the configured probe timeout, see
	// health.WithProbeTimeout). A working tunnel answers well inside it.
	ConfirmProbeTimeout time.Duration
	HeartbeatInterval   time.Duration // "VPN healthy: exit=US" at most this often (600 s); 0 = never

	StormCooldown   time.Duration // after every candidate failed (600 s)
	ReconnectWindow time.Duration // rate limit: the longest backoff (600 s; 1/20 of it is the first)
	ReconnectLimit  int           // automatic attempts in a row without a lasting tunnel before the backoff (6)
	CascadeAfter    int           // failed reconnects before fast rotation (2)

	Phase1Timeout time.Duration // local state up after connect (20 s)
	Phase1Poll    time.Duration // (500 ms)
	Phase2Timeout time.Duration // data plane proven (60 s)
	Phase2Poll    time.Duration // (3 s)

	LogHealthThreshold int           // urltest errors above which a node is dead (10)
	LogHealthStale     time.Duration // log health older than this is ignored (20 min)

	AccountRetryMin time.Duration // first retry after "Account check failed" on connect (3 s)
	AccountRetryMax time.Duration // cap of its doubling backoff (60 s)

	// MemoryFile, when set, keeps the last healthy node and the nodes
	// that failed since (0600, atomic) so a restarted daemon does not
	// start again on a node that was just found dead (see the package doc).
	MemoryFile string
	// StartMemory is how old that memory may be to be used at startup (1 h).
	StartMemory time.Duration

	LoginRetries         int           // retries per login round (5)
	LoginBackoffMin      time.Duration // first retry delay (3 s)
	LoginBackoffMax      time.Duration // cap and delay between rounds (60 s)
	SubscriptionCooldown time.Duration // (1 h)
	// LoginRefresh renews the login this often while the tunnel is healthy
	// (30 min; 0 = never): see refresh.go. Each refresh is a round of
	// LoginRetries retries with the login backoff.
	LoginRefresh  time.Duration
	FailOpen      bool // drop the kill switch after FailOpenAfter login failures
	FailOpenAfter int  // (5)

	StopTimeout  time.Duration // teardown + disconnect budget on stop (2.5 s; the whole stop stays under 5 s)
	AuthStopWait time.Duration // how long stop waits for the login worker (1 s)

	// StateFile, when set, receives the Status JSON (0600, atomic) after
	// every change.
	StateFile string
	// MaxTransitions kept in Status (20).
	MaxTransitions int
}

// DefaultSettings are the shipped defaults: config.Default() mapped by
// SettingsFromConfig, without state files (the caller chooses where state
// lives). The numbers live once, in package config.
func DefaultSettings() Settings {
	s := SettingsFromConfig(config.Default())
	s.StateFile, s.MemoryFile = "", ""
	return s
}

// engineDefaults are the knobs the config does not expose; SettingsFromConfig
// starts from them.
func engineDefaults() Settings {
	return Settings{
		CascadeAfter: 2,
		// Lab and field probes answer in tens of ms; 2 s still leaves a
		// lost SYN (1 s initial RTO) room for one retransmission.
		ConfirmProbeTimeout: 2 * time.Second,
		Phase1Timeout:       20 * time.Second,
		Phase1Poll:          500 * time.Millisecond,
		Phase2Timeout:       60 * time.Second,
		Phase2Poll:          3 * time.Second,
		AccountRetryMin:     3 * time.Second,
		AccountRetryMax:     60 * time.Second,
		StartMemory:         time.Hour,
		StopTimeout:         2500 * time.Millisecond,
		AuthStopWait:        time.Second,
		MaxTransitions:      20,
	}
}

// Validate reports every setting that would make the engine misbehave.
func (s Settings) Validate() error {
	var errs []error
	pos := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", name, d))
		}
	}
	if len(s.Candidates) == 0 && s.Node == "" {
		errs = append(errs, errors.New("no node and no candidates configured"))
	}
	pos("check_interval", s.CheckInterval)
	pos("degraded_interval", s.DegradedInterval)
	pos("confirm_probe_timeout", s.ConfirmProbeTimeout)
	pos("storm_cooldown", s.StormCooldown)
	pos("reconnect_window", s.ReconnectWindow)
	pos("phase1_timeout", s.Phase1Timeout)
	pos("phase1_poll", s.Phase1Poll)
	pos("phase2_timeout", s.Phase2Timeout)
	pos("phase2_poll", s.Phase2Poll)
	pos("login_backoff_min", s.LoginBackoffMin)
	pos("login_backoff_max", s.LoginBackoffMax)
	pos("subscription_cooldown", s.SubscriptionCooldown)
	pos("stop_timeout", s.StopTimeout)
	pos("account_retry_min", s.AccountRetryMin)
	pos("account_retry_max", s.AccountRetryMax)
	pos("start_memory", s.StartMemory)
	if s.FailThreshold < 1 {
		errs = append(errs, fmt.Errorf("fail_threshold must be at least 1, got %d", s.FailThreshold))
	}
	if s.ReconnectLimit < 1 {
		errs = append(errs, fmt.Errorf("reconnect_limit must be at least 1, got %d", s.ReconnectLimit))
	}
	if s.CascadeAfter < 1 {
		errs = append(errs, fmt.Errorf("cascade_after must be at least 1, got %d", s.CascadeAfter))
	}
	if s.FailOpenAfter < 1 {
		errs = append(errs, fmt.Errorf("fail_open_after must be at least 1, got %d", s.FailOpenAfter))
	}
	if s.LoginRefresh < 0 {
		errs = append(errs, fmt.Errorf("login_refresh must not be negative (0 = off), got %s", s.LoginRefresh))
	}
	if s.LoginRetries < 0 {
		errs = append(errs, fmt.Errorf("login_retries must not be negative, got %d", s.LoginRetries))
	}
	return errors.Join(errs...)
}

// candidates is the rotation list, the preferred node first when it is not
// among the configured candidates.
func (s Settings) candidates() []string {
	if len(s.Candidates) == 0 {
		return []string{s.Node}
	}
	return s.Candidates
}
