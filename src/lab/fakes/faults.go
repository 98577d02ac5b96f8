package fakes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"time"
)

// Auth fault values (Faults.Auth). Each makes the account API and the fake
// CLI answer the way the contract says the real service can fail.
const (
	AuthOK           = ""              // normal service
	AuthRateLimited  = "429"           // login: "Too Many Requests (429)"
	AuthInvalid      = "invalid"       // login: "invalid username/password"
	AuthSubscription = "subscription"  // status: "subscription not active"; login: "Subscription expired"
	AuthExpired      = "expired"       // status: "session expired" for sessions older than the fault
	AuthDeviceLimit  = "device_limit"  // login: "Device limit reached"
	AuthAccountCheck = "account_check" // login and connect: "Account check failed"
)

// AuthValues lists every valid Faults.Auth value.
var AuthValues = []string{AuthOK, AuthRateLimited, AuthInvalid, AuthSubscription, AuthExpired, AuthDeviceLimit, AuthAccountCheck}

// Faults are the run-time faults the fakes and the internet servers
// implement. The lab's fault API rewrites faults.json atomically; every
// reader re-reads it when its mtime changes (see Watcher). The zero value
// means "no faults".
type Faults struct {
	// NodeDown: exits (or relays) by name that refuse tunnels: an exit
	// resets the connection, a relay in front of it answers ERR.
	NodeDown []string `json:"node_down"`
	// Node503: exits by name that answer every HTTP request themselves with
	// "HTTP/1.1 503 Service Unavailable".
	Node503 []string `json:"node_503"`
	// LatencyMS: extra round-trip time by exit or relay name, added at
	// connect and split over both directions of every chunk.
	LatencyMS map[string]int `json:"latency_ms"`
	// APIDown: the account API resets every connection.
	APIDown bool `json:"api_down"`
	// Auth: one of AuthValues.
	Auth string `json:"auth"`
	// LoginHang: "surflare login" hangs forever before prompting.
	LoginHang bool `json:"login_hang"`
	// DisconnectHalf: "surflare disconnect" stops the proxy but leaves the
	// table, a duplicated ip rule and the table-100 route, and exits 1.
	DisconnectHalf bool `json:"disconnect_half"`
	// DomesticExit: the proxy dials destinations directly (mark 0xff)
	// instead of through the tunnel, so echo hosts see the household's
	// address (country CN).
	DomesticExit bool `json:"domestic_exit"`
	// ProxyLoop: the proxy's outbound sockets carry no mark, so they are
	// captured by its own tproxy rule again (a same-host loop).
	ProxyLoop bool `json:"proxy_loop"`
	// Injected records when each fault (by JSON name) was last changed;
	// Update maintains it. The account API uses Injected["auth"] to decide
	// which sessions an "expired" fault invalidates.
	Injected map[string]time.Time `json:"injected"`
}

// Validate reports a fault set that no reader could implement.
func (f Faults) Validate() error {
	if !slices.Contains(AuthValues, f.Auth) {
		return fmt.Errorf("auth fault %q is not one of %q", f.Auth, AuthValues)
	}
	for name, ms := range f.LatencyMS {
		if ms < 0 {
			return fmt.Errorf("latency_ms[%q] = %d: must be >= 0", name, ms)
		}
	}
	return nil
}

// IsNodeDown reports whether the exit or relay called name is down.
func (f Faults) IsNodeDown(name string) bool { return slices.Contains(f.NodeDown, name) }

// Is503 reports whether the exit called name answers HTTP with 503.
func (f Faults) Is503(name string) bool { return slices.Contains(f.Node503, name) }

// Latency returns the extra round-trip time configured for name.
func (f Faults) Latency(name string) time.Duration {
	return time.Duration(f.LatencyMS[name]) * time.Millisecond
}

// LoadFaults reads labDir/faults.json. A missing file means no faults.
func LoadFaults(labDir string) (Faults, error) {
	f, _, err := loadFaultsFile(filepath.Join(labDir, FaultsFile))
	return f, err
}

func loadFaultsFile(path string) (Faults, fs.FileInfo, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Faults{}, nil, nil
	}
	if err != nil {
		return Faults{}, nil, fmt.Errorf("reading faults: %w", err)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) { // removed between stat and read
		return Faults{}, nil, nil
	}
	if err != nil {
		return Faults{}, nil, fmt.Errorf("reading faults: %w", err)
	}
	var f Faults
	if err := json.Unmarshal(b, &f); err != nil {
		return Faults{}, nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	if err := f.Validate(); err != nil {
		return Faults{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, fi, nil
}

// Save validates f and writes it atomically (temp file + rename) to
// labDir/faults.json. It does not touch Injected; see Update.
func (f Faults) Save(labDir string) error {
	if err := f.Validate(); err != nil {
		return fmt.Errorf("saving faults: %w", err)
	}
	return writeJSONAtomic(filepath.Join(labDir, FaultsFile), f)
}

// faultsMu serialises Update within one process; the lab CLI is the only
// writer, so cross-process locking is not needed.
var faultsMu sync.Mutex

// Update loads the faults, lets change modify them, stamps Injected[name] =
// now for every field whose value changed, and saves them atomically. It
// returns the faults as saved.
func Update(labDir string, now time.Time, change func(*Faults)) (Faults, error) {
	faultsMu.Lock()
	defer faultsMu.Unlock()
	old, err := LoadFaults(labDir)
	if err != nil {
		return Faults{}, err
	}
	next := old.clone()
	change(&next)
	if next.Injected == nil {
		next.Injected = map[string]time.Time{}
	}
	ov, nv := reflect.ValueOf(old), reflect.ValueOf(next)
	for i := 0; i < ov.NumField(); i++ {
		name, _, _ := cutComma(ov.Type().Field(i).Tag.Get("json"))
		if name == "injected" {
			continue
		}
		if !reflect.DeepEqual(normalise(ov.Field(i)), normalise(nv.Field(i))) {
			next.Injected[name] = now.UTC()
		}
	}
	if err := next.Save(labDir); err != nil {
		return Faults{}, err
	}
	return next, nil
}

func (f Faults) clone() Faults {
	c := f
	c.NodeDown = slices.Clone(f.NodeDown)
	c.Node503 = slices.Clone(f.Node503)
	if f.LatencyMS != nil {
		c.LatencyMS = make(map[string]int, len(f.LatencyMS))
		for k, v := range f.LatencyMS {
			c.LatencyMS[k] = v
		}
	}
	if f.Injected != nil {
		c.Injected = make(map[string]time.Time, len(f.Injected))
		for k, v := range f.Injected {
			c.Injected[k] = v
		}
	}
	return c
}

// normalise treats nil and empty slices/maps as equal so that Update does
// not stamp a fault that only changed representation.
func normalise(v reflect.Value) any {
	if (v.Kind() == reflect.Slice || v.Kind() == reflect.Map) && v.Len() == 0 {
		return nil
	}
	return v.Interface()
}

func cutComma(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ',' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// WatchInterval is how often a Watcher stats faults.json at most.
const WatchInterval = 200 * time.Millisecond

// Watcher hands out the current faults, re-reading faults.json only when
// its mtime, size or inode changed, and stat-ing it at most every
// WatchInterval. A file that fails to parse keeps the last good faults.
// Safe for concurrent use.
type Watcher struct {
	path string
	now  func() time.Time
	log  *slog.Logger

	mu        sync.Mutex
	lastCheck time.Time
	seen      fs.FileInfo
	cur       Faults
	modTime   time.Time
}

// NewWatcher watches labDir/faults.json; now is the clock (nil = time.Now).
func NewWatcher(labDir string, now func() time.Time) *Watcher {
	if now == nil {
		now = time.Now
	}
	return &Watcher{
		path: filepath.Join(labDir, FaultsFile),
		now:  now,
		log:  slog.Default().With("subsystem", "lab-faults"),
	}
}

// Current returns the faults in force now.
func (w *Watcher) Current() Faults {
	f, _ := w.CurrentWithTime()
	return f
}

// CurrentWithTime returns the faults and the modification time of the file
// they came from (zero when there is no file).
func (w *Watcher) CurrentWithTime() (Faults, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if d := now.Sub(w.lastCheck); !w.lastCheck.IsZero() && d >= 0 && d < WatchInterval {
		return w.cur, w.modTime
	}
	w.lastCheck = now
	fi, err := os.Stat(w.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		w.seen, w.cur, w.modTime = nil, Faults{}, time.Time{}
		return w.cur, w.modTime
	case err != nil:
		w.log.Warn("cannot stat faults file, keeping last faults", "err", err)
		return w.cur, w.modTime
	}
	if w.seen != nil && sameFile(w.seen, fi) {
		return w.cur, w.modTime
	}
	f, fi2, err := loadFaultsFile(w.path)
	if err != nil {
		w.log.Warn("bad faults file, keeping last faults", "err", err)
		return w.cur, w.modTime
	}
	w.seen, w.cur = fi2, f
	if fi2 != nil {
		w.modTime = fi2.ModTime()
	} else {
		w.modTime = time.Time{}
	}
	return w.cur, w.modTime
}

func sameFile(a, b fs.FileInfo) bool {
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}
