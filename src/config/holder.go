package config

import (
	"sync"
	"sync/atomic"
)

// Holder keeps the config the daemon runs with. A reload that fails leaves
// the last good config in place, so a typo in /etc/config/surflare never
// takes protection down.
type Holder struct {
	path string
	mu   sync.Mutex // serialises reloads
	cur  atomic.Pointer[Config]
	// warns are the warnings of the config in cur.
	warns atomic.Pointer[[]Warning]
}

// NewHolder loads path; it fails when the file cannot be read or has errors
// (at start there is no last good config to fall back on).
func NewHolder(path string) (*Holder, error) {
	c, w, err := Load(path)
	if err != nil {
		return nil, err
	}
	h := &Holder{path: path}
	h.cur.Store(c)
	h.warns.Store(&w)
	return h, nil
}

// Path is the file the holder reads.
func (h *Holder) Path() string { return h.path }

// Get returns the current config. Callers must not modify it.
func (h *Holder) Get() *Config { return h.cur.Load() }

// Warnings returns the warnings of the current config.
func (h *Holder) Warnings() []Warning { return *h.warns.Load() }

// Reload reads the file again. On success the new config replaces the old
// one and changed says whether any setting differs. On error the previous
// config stays current and the error lists every problem.
func (h *Holder) Reload() (changed bool, warns []Warning, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, w, err := Load(h.path)
	if err != nil {
		return false, w, err
	}
	changed = !Equal(h.cur.Load(), c)
	h.cur.Store(c)
	h.warns.Store(&w)
	return changed, w, nil
}
