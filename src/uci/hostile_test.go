package uci

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// Protection: getln grows its buffer only when it is full (as libuci's
// uci_getln). It used to double it after every chunk without a newline,
// and a NUL byte ends every chunk early: a file with ~60 NULs on unended
// lines overflowed the size, fgets was asked for a negative count, and the
// parse loop never ended — /etc/config/surflare with garbage hung the
// daemon's start and every SIGHUP.
func TestParseGarbageWithNULsTerminates(t *testing.T) {
	line := append(bytes.Repeat([]byte("x"), 10), 0, 'y', '\n')
	r := rand.New(rand.NewPCG(21, 21))
	random := make([]byte, 64<<10)
	for i := range random {
		random[i] = byte(r.UintN(256))
	}
	for name, data := range map[string][]byte{"NUL lines": bytes.Repeat(line, 200), "64 KiB of random bytes": random} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			ParseNonStrict("surflare", data)
			Parse("surflare", data)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("parsing %s did not end in 10 s (getln's buffer size overflowed)", name)
		}
	}
}
