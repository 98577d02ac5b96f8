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

// Tokens holds the credentials the API accepts: short-lived tokens minted
// for LuCI (through the ubus `token` method, which rpcd's ACL guards) and
// long-lived bearer tokens read from a 0600 file where there is no
// OpenWrt. Only SHA-256 digests are kept, and every check compares against
// all of them in constant time, so timing reveals nothing about a token.
type Tokens struct {
	now func() time.Time

	mu     sync.Mutex
	minted []mintedToken
	static [][sha256.Size]byte
}

type mintedToken struct {
	digest  [sha256.Size]byte
	expires time.Time
}

// NewTokens returns an empty token store using now as its clock (nil =
// time.Now).
func NewTokens(now func() time.Time) *Tokens {
	if now == nil {
		now = time.Now
	}
	return &Tokens{now: now}
}

// Mint returns a new random token valid for ttl (clamped to 1 s … 24 h).
// Tokens are 26 characters of base32 (130 bits), safe in a header, a URL
// fragment and a websocket subprotocol.
func (t *Tokens) Mint(ttl time.Duration) string {
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
	t.minted = append(t.minted, mintedToken{digest: sha256.Sum256([]byte(tok)), expires: now.Add(ttl)})
	return tok
}

// AddStatic accepts tok until the process ends (the token file's bearer
// token). It refuses tokens too short to be secret or unusable in an
// Authorization header or websocket subprotocol.
func (t *Tokens) AddStatic(tok string) error {
	if err := checkTokenSyntax(tok); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.static = append(t.static, sha256.Sum256([]byte(tok)))
	return nil
}

// Valid reports whether tok is a live minted token or a static one.
func (t *Tokens) Valid(tok string) bool {
	if tok == "" {
		return false
	}
	d := sha256.Sum256([]byte(tok))
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	ok := 0
	for _, m := range t.minted {
		match := subtle.ConstantTimeCompare(d[:], m.digest[:])
		ok |= match & boolInt(now.Before(m.expires))
	}
	for _, s := range t.static {
		ok |= subtle.ConstantTimeCompare(d[:], s[:])
	}
	return ok == 1
}

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
