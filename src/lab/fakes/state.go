package fakes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// State is the fake surflare CLI's own persistent state (what the real
// client keeps in its config dir): the session and the current connection.
type State struct {
	LoggedIn bool      `json:"logged_in"`
	Email    string    `json:"email,omitempty"`
	Token    string    `json:"token,omitempty"`
	LoginAt  time.Time `json:"login_at,omitzero"`
	Remember bool      `json:"remember,omitempty"`

	Connected bool   `json:"connected"`
	Node      string `json:"node,omitempty"`
	Transit   string `json:"transit,omitempty"` // relay name or TransitAuto
	Mode      string `json:"mode,omitempty"`
	ProxyPID  int    `json:"proxy_pid,omitempty"`
}

// TransitAuto selects the first relay that answers.
const TransitAuto = "auto"

// TransitNone is a single-hop connection straight to the exit (E4: connect
// without --transit); status shows it as "transit: none".
const TransitNone = "none"

// StatePath returns the state file of a lab.
func StatePath(li LabInfo) string { return filepath.Join(li.StateDir, StateFile) }

// LoadState reads the CLI state; a missing file is the logged-out state.
func LoadState(li LabInfo) (State, error) {
	b, err := os.ReadFile(StatePath(li))
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("reading surflare state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, fmt.Errorf("parsing %s: %w", StatePath(li), err)
	}
	return s, nil
}

// SaveState writes the CLI state atomically.
func SaveState(li LabInfo, s State) error {
	return writeJSONAtomic(StatePath(li), s)
}
