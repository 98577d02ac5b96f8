package fakes

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// CLICallsFile is where the fake CLI records each of its invocations,
// under the lab directory: one JSON line per call (CLICall).
const CLICallsFile = "log/surflare-calls.jsonl"

// CLICall is one invocation of the fake `surflare`: what it was asked and
// which descriptors above stderr it was started with, i.e. what its caller
// (the daemon) let it inherit (E5). A lab test counts connects with it and
// checks that no daemon descriptor reached the vendor.
type CLICall struct {
	At        time.Time     `json:"at"`
	PID       int           `json:"pid"`
	PPID      int           `json:"ppid"`
	Cmd       string        `json:"cmd"`
	Args      []string      `json:"args,omitempty"`
	Inherited []InheritedFD `json:"inherited,omitempty"`
}

// InheritedFD is a descriptor a process was started with: not
// close-on-exec when it was exec'd (the Go runtime's own are).
type InheritedFD struct {
	FD     int    `json:"fd"`
	Target string `json:"target"` // what /proc/self/fd/N links to
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
}

// LoadCLICalls reads every call recorded in the lab at labDir, oldest
// first; no file is no calls.
func LoadCLICalls(labDir string) ([]CLICall, error) {
	f, err := os.Open(filepath.Join(labDir, CLICallsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []CLICall
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var c CLICall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return out, fmt.Errorf("%s: %w", CLICallsFile, err)
		}
		out = append(out, c)
	}
	return out, sc.Err()
}
