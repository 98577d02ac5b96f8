package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Token lifetimes. A minted token only has to survive the page load that
// asked for it: it is checked when a request or websocket starts, and an
// open websocket stays open after its token expires.
const (
	// DefaultTokenTTL is what the ubus `token` method should pass to Mint.
	DefaultTokenTTL = 10 * time.Minute
	minTokenTTL     = time.Second
	maxTokenTTL     = 24 * time.Hour
	// maxMinted bounds memory when something mints in a loop; the token
	// closest to expiry is forgotten first.
	maxMinted = 64
	// minStaticToken is the shortest token accepted from the token file.
	minStaticToken = 16
)

// Scope is what a token lets its holder do. LuCI users may have read
// access only (rpcd's read ACL): they may watch, never act. A token minted
// for them must carry that limit to the API, or the API would be a way
// around the ACL.
type Scope uint8

// Token scopes, from least to most.
const (
	// ScopeNone is no valid token at all.
	ScopeNone Scope = iota
	// ScopeRead opens the read endpoints (GET, HEAD) and the websocket.
	ScopeRead
	// ScopeWrite opens every endpoint, the commands included.
	ScopeWrite
)

// String names the scope as the ubus token replies do ("read", "write").
func (s Scope) String() string {
	switch s {
	case ScopeRead:
		return "read"
	case ScopeWrite:
		return "write"
	}
	return "none"
}

// Allows reports whether a request with this method may pass. Only GET and
// HEAD change nothing; every other method, on any route present or future,
// needs a write token.
func (s Scope) Allows(method string) bool {
	switch s {
	case ScopeWrite:
		return true
	case ScopeRead:
		return method == "GET" || method == "HEAD"
	}
	return false
}

// Tokens holds the credentials the API accepts: short-lived tokens minted
// for LuCI through ubus (read ones by `token`, which the read ACL grants;
// write ones by `token_write`, which only the write ACL grants) and
// long-lived bearer tokens read from a 0600 file where there is no
// OpenWrt (write: whoever can read that file is root). Only SHA-256
// digests are kept, and every check compares against all of them in
// constant time, so timing reveals nothing about a token.
type Tokens struct {
	now func() time.Time

	mu     sync.Mutex
	minted []mintedToken
	static [][sha256.Size]byte
}

type mintedToken struct {
	digest  [sha256.Size]byte
	expires time.Time
	scope   Scope
}

// NewTokens returns an empty token store using now as its clock (nil =
// time.Now).
func NewTokens(now func() time.Time) *Tokens {
	if now == nil {
		now = time.Now
	}
	return &Tokens{now: now}
}

// Mint returns a new read-only token valid for ttl: the live view's, for
// whoever may see the status. See MintScoped.
func (t *Tokens) Mint(ttl time.Duration) string { return t.MintScoped(ScopeRead, ttl) }

// MintScoped returns a new random token of the given scope (ScopeRead or
// ScopeWrite; anything else is read) valid for ttl (clamped to 1 s …
// 24 h). Tokens are 26 characters of base32 (130 bits), safe in a header,
// a URL fragment and a websocket subprotocol.
func (t *Tokens) MintScoped(scope Scope, ttl time.Duration) string {
	if scope != ScopeWrite {
		scope = ScopeRead
	}
	ttl = min(max(ttl, minTokenTTL), maxTokenTTL)
	tok := rand.Text()
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.pruneLocked(now)
	if len(t.minted) >= maxMinted {
		soonest := 0
		for i, m := range t.minted {
			if m.expires.Before(t.minted[soonest].expires) {
				soonest = i
			}
		}
		t.minted = append(t.minted[:soonest], t.minted[soonest+1:]...)
	}
	t.minted = append(t.minted, mintedToken{digest: sha256.Sum256([]byte(tok)), expires: now.Add(ttl), scope: scope})
	return tok
}

// Grant mints a token of the scope and returns the reply of the ubus
// methods that hand tokens out (token: read, token_write: write), so the
// daemon's handlers stay one line each:
// {"token": "...", "expires_in": seconds, "scope": "read"|"write"}.
func (t *Tokens) Grant(scope Scope, ttl time.Duration) map[string]any {
	if scope != ScopeWrite {
		scope = ScopeRead
	}
	ttl = min(max(ttl, minTokenTTL), maxTokenTTL)
	return map[string]any{"token": t.MintScoped(scope, ttl), "expires_in": int(ttl / time.Second), "scope": scope.String()}
}

// AddStatic accepts tok with write scope until the process ends (the
// token file's bearer token, readable by root only). It refuses tokens too
// short to be secret or unusable in an Authorization header or websocket
// subprotocol.
func (t *Tokens) AddStatic(tok string) error {
	if err := checkTokenSyntax(tok); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.static = append(t.static, sha256.Sum256([]byte(tok)))
	return nil
}

// Lookup returns tok's scope: ScopeNone when it is neither a live minted
// token nor a static one.
func (t *Tokens) Lookup(tok string) Scope {
	if tok == "" {
		return ScopeNone
	}
	d := sha256.Sum256([]byte(tok))
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	scope := 0
	for _, m := range t.minted {
		match := subtle.ConstantTimeCompare(d[:], m.digest[:]) & boolInt(now.Before(m.expires))
		scope |= subtle.ConstantTimeSelect(match, int(m.scope), 0)
	}
	for _, s := range t.static {
		scope |= subtle.ConstantTimeSelect(subtle.ConstantTimeCompare(d[:], s[:]), int(ScopeWrite), 0)
	}
	// Digests of distinct random tokens do not collide; if they ever did,
	// the bits of both scopes would be set: take the higher.
	return min(Scope(scope), ScopeWrite)
}

// Valid reports whether tok is a live minted token or a static one, of
// any scope.
func (t *Tokens) Valid(tok string) bool { return t.Lookup(tok) != ScopeNone }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (t *Tokens) pruneLocked(now time.Time) {
	live := t.minted[:0]
	for _, m := range t.minted {
		if now.Before(m.expires) {
			live = append(live, m)
		}
	}
	t.minted = live
}

// checkTokenSyntax allows the characters of RFC 7230 tokens that are also
// unreserved in URLs, which every place a token travels accepts as is.
func checkTokenSyntax(tok string) error {
	if len(tok) < minStaticToken {
		return fmt.Errorf("token is %d characters long; at least %d are needed", len(tok), minStaticToken)
	}
	for i, r := range tok {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~", r)) {
			return fmt.Errorf("token has %q at position %d; use only letters, digits and -._~", r, i+1)
		}
	}
	return nil
}

// LoadTokenFile returns the bearer token stored in path, creating the file
// (mode 0600, directory 0700) with a fresh random token when it is missing.
// A file others can read is made 0600 and a warning is logged: the token
// may have leaked, so replace it if the machine is shared.
func LoadTokenFile(path string, log *slog.Logger) (string, error) {
	if log == nil {
		log = slog.Default().With("subsystem", "api")
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createTokenFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("reading web token file: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("web token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("web token file %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return "", fmt.Errorf("web token file %s is readable by others and chmod failed: %w", path, err)
		}
		log.Warn("Web token file was readable by others; made it 0600 (replace the token if others may have read it)",
			"path", path, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
	tok := strings.TrimSpace(string(b))
	if err := checkTokenSyntax(tok); err != nil {
		return "", fmt.Errorf("web token file %s: %w", path, err)
	}
	return tok, nil
}

func createTokenFile(path string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("creating web token directory: %w", err)
	}
	tok := rand.Text()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("creating web token file: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return "", fmt.Errorf("writing web token file: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("writing web token file: %w", err)
	}
	return tok, nil
}
