// Package detectors is the layer between the detectors (the packages
// below this folder: early detector, fast signals, log health, 503 storm
// monitor) and the engine: the rules that turn what they see into the
// engine's evidence (watchdog.Corroborator) and its veto on rotation
// (watchdog.Override). The README says which detector sees which fault.
package detectors

import (
	"time"

	"surflare-watchdog/src/detectors/detect"
	"surflare-watchdog/src/detectors/fastsignal"
	"surflare-watchdog/src/firewall"
)

// Corroborator is watchdog.Corroborator, restated here so the detectors do
// not import the engine: evidence that the node in use is broken, which
// lets one failed check below the threshold rotate.
type Corroborator interface {
	Corroborate(now time.Time, node, transit string) (why string, broken bool)
}

// Silence is watchdog.Corroborator over the early detector's
// silent flows: the proxy carries only the current tunnel, so flows to the
// relays that were acknowledged and never answered name the node in use
// (the relay is alive: it acknowledged; what is behind it is not).
type Silence struct{ Det *detect.Detector }

// Corroborate is watchdog.Corroborator.
func (s Silence) Corroborate(now time.Time, _, _ string) (string, bool) {
	return s.Det.Evidence(now)
}

// AnyEvidence asks each corroborator in turn; the first that names the
// node broken wins.
type AnyEvidence []Corroborator

// Corroborate is watchdog.Corroborator.
func (a AnyEvidence) Corroborate(now time.Time, node, transit string) (string, bool) {
	for _, c := range a {
		if why, ok := c.Corroborate(now, node, transit); ok {
			return why, true
		}
	}
	return "", false
}

// AsOfCorroborator is watchdog.AsOfCorroborator, restated: evidence the
// check itself can feed (the proxy logs the check's own connections),
// asked as it stood when the check started.
type AsOfCorroborator interface {
	CorroborateAsOf(asOf, now time.Time, node, transit string) (why string, broken bool)
}

// CorroborateAsOf is watchdog.AsOfCorroborator: each member that can tell
// answers as of asOf, the others as of now.
func (a AnyEvidence) CorroborateAsOf(asOf, now time.Time, node, transit string) (string, bool) {
	for _, c := range a {
		var why string
		var ok bool
		if ao, can := c.(AsOfCorroborator); can {
			why, ok = ao.CorroborateAsOf(asOf, now, node, transit)
		} else {
			why, ok = c.Corroborate(now, node, transit)
		}
		if ok {
			return why, true
		}
	}
	return "", false
}

// CounterRule says which counters the counter watch follows and what a
// jump of each means: the kill switch's drops of router traffic, strict
// direct's refusals of the proxy's own direct traffic (a proxy going
// direct), and RSTs from relays (a path being reset, or RST injection).
func CounterRule(name string) (fastsignal.Rule, bool) {
	switch name {
	case firewall.CounterBlockedOut:
		return fastsignal.Rule{Meaning: "router traffic dropped by the kill switch"}, true
	case firewall.CounterDirectBlocked:
		// Strict direct allows everything the proxy legitimately sends
		// direct; a refusal is the proxy going direct.
		return fastsignal.Rule{Meaning: "the proxy's direct traffic refused by strict direct", AnyRise: true}, true
	case firewall.CounterRstIn:
		return fastsignal.Rule{Meaning: "RSTs from relays"}, true
	}
	return fastsignal.Rule{}, false
}

// EvidenceCounters are the counters whose jump is evidence against the
// node in use (fastsignal.Evidence): RSTs from the relays and strict
// direct's refusals. The kill switch's drops of router traffic only ask
// for a check: they rise with any local misconfiguration too.
var EvidenceCounters = []string{firewall.CounterRstIn, firewall.CounterDirectBlocked}
