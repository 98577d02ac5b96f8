// Package fakes holds what the lab's fake vendor binaries (surflare,
// surflare-proxy), the internet-side servers and the lab tooling share: the
// static lab facts (lab.json), the run-time faults (faults.json) with a cheap
// mtime-based watcher, the fake CLI's state file, and the tunnel protocol the
// fake proxy speaks to the fake relays and exits.
//
// Everything here is lab-only: the watchdog itself never imports it.
package fakes

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// File names inside a lab directory.
const (
	LabInfoFile = "lab.json"
	FaultsFile  = "faults.json"
	StateFile   = "surflare-state.json" // inside LabInfo.StateDir
	BinDir      = "bin"
	CLIName     = "surflare"       // fake vendor CLI, bin/surflare
	ProxyName   = "surflare-proxy" // fake proxy, bin/surflare-proxy; also its comm
)

// LabPassword is the only password the lab's account API accepts (for any
// email). Tests and the demo configure the watchdog with it.
const LabPassword = "lab-password"

// DefaultProxyNofile is the RLIMIT_NOFILE soft limit the fake proxy sets on
// itself unless LabInfo.ProxyNofile says otherwise: a known, small value so
// that proxy-loop / fd-exhaustion tests behave the same on every machine.
const DefaultProxyNofile = 1024

// LabInfo is the static description of one lab, written by the topology code
// at "up" and read by the fakes (which find it next to their bin/ directory).
type LabInfo struct {
	Prefix           string `json:"prefix"`
	ProxyLog         string `json:"proxy_log"`
	StateDir         string `json:"state_dir"`
	APIURL           string `json:"api_url"`
	URLTestURL       string `json:"urltest_url"`
	URLTestIntervalS int    `json:"urltest_interval_s"`
	LANIf            string `json:"lan_if"`
	WANIf            string `json:"wan_if"`
	// ProxyNofile overrides DefaultProxyNofile for the fake proxy (0 = default).
	ProxyNofile int `json:"proxy_nofile,omitempty"`
	// URLTestTimeoutMS bounds one urltest request (0 = 2000 ms).
	URLTestTimeoutMS int `json:"urltest_timeout_ms,omitempty"`
	// Vendor holds the knobs of the fakes' behaviour (see Vendor, Knobs).
	Vendor Vendor `json:"vendor"`
}

// DefaultLabInfo returns the facts for a lab rooted at labDir with the plan's
// standard endpoints; the topology code fills in Prefix and writes it.
func DefaultLabInfo(labDir, prefix string) LabInfo {
	return LabInfo{
		Prefix:           prefix,
		ProxyLog:         filepath.Join(labDir, "log", "surflare-proxy.log"),
		StateDir:         filepath.Join(labDir, "state"),
		APIURL:           "http://198.18.40.1/",
		URLTestURL:       "http://198.18.30.21/generate_204",
		URLTestIntervalS: DefaultURLTestIntervalS,
		LANIf:            "br-lan",
		WANIf:            "pppoe-wan",
		Vendor:           DefaultVendor(),
	}
}

// LoadLabInfo reads labDir/lab.json. Missing optional fields get the same
// defaults DefaultLabInfo uses, so a hand-written lab.json stays short.
func LoadLabInfo(labDir string) (LabInfo, error) {
	path := filepath.Join(labDir, LabInfoFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return LabInfo{}, fmt.Errorf("reading lab info: %w", err)
	}
	li := DefaultLabInfo(labDir, "")
	if err := json.Unmarshal(b, &li); err != nil {
		return LabInfo{}, fmt.Errorf("parsing %s: %w", path, err)
	}
	if li.URLTestIntervalS <= 0 {
		return LabInfo{}, fmt.Errorf("%s: urltest_interval_s must be > 0, got %d", path, li.URLTestIntervalS)
	}
	return li, nil
}

// Save writes the lab info atomically to labDir/lab.json.
func (li LabInfo) Save(labDir string) error {
	return writeJSONAtomic(filepath.Join(labDir, LabInfoFile), li)
}

// LabDirOfExecutable returns the lab directory of the running fake binary:
// the parent of the bin/ directory that holds it.
func LabDirOfExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locating own executable: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	return filepath.Dir(filepath.Dir(exe)), nil
}

// writeJSONAtomic writes v as indented JSON to path via a temporary file in
// the same directory and a rename, so readers never see a partial file.
func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", filepath.Base(path), err)
	}
	b = append(b, '\n')
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), 0o644)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	return nil
}
