package ubus

import (
	"bufio"
	"bytes"
	"path/filepath"
	"surflare-watchdog/src/testenv"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the framing reader, the decoder and
// the INVOKE salvager: none may panic, and whatever decodes must encode to the same length
// (only padding content may differ) and decode again to the same message.
// CI: go test -run=^$ -fuzz=FuzzDecode -fuzztime=10s ./src/ubus
func FuzzDecode(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = readFrame(bufio.NewReader(bytes.NewReader(b)))
		_, _ = UnmarshalFields(b)
		_ = salvageInvoke(b)
		m, err := Decode(b)
		if err != nil {
			return
		}
		enc, err := m.Encode()
		if err != nil {
			t.Fatalf("decoded message does not encode: %v", err)
		}
		if len(enc) != len(b) {
			t.Fatalf("re-encoded length %d, input %d", len(enc), len(b))
		}
		m2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		enc2, err := m2.Encode()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("decode→encode not stable: %v\n%x\n%x", err, enc, enc2)
		}
	})
}

// fuzzSeeds are every golden message, when the fixtures are there.
func fuzzSeeds(f *testing.F) [][]byte {
	dir := fixtureDirOrEmpty()
	if dir == "" {
		f.Log("ubus fixtures not found; fuzzing without seeds")
		return [][]byte{{0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 4}}
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.trace"))
	var out [][]byte
	for _, n := range names {
		for _, l := range loadTrace(f, filepath.Base(n)) {
			out = append(out, l.msg)
		}
	}
	return out
}

func fixtureDirOrEmpty() string { return testenv.FixturesDir("ubus") }
