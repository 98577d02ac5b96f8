package credentials

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const planted = "pl4nted-S3cret!pw"

// assertNoLeak fails if out holds the planted password, plain or hex.
func assertNoLeak(t *testing.T, what, out string) {
	t.Helper()
	for _, form := range []string{planted, hex.EncodeToString([]byte(planted)), strings.ToUpper(hex.EncodeToString([]byte(planted)))} {
		if strings.Contains(out, form) {
			t.Errorf("%s leaks the password: %q", what, out)
		}
	}
}

func TestSecretRevealOnlyThroughReveal(t *testing.T) {
	s := NewSecret(planted)
	if s.Reveal() != planted || s.IsZero() {
		t.Fatalf("Reveal() = %q, IsZero %v", s.Reveal(), s.IsZero())
	}
	if !NewSecret("").IsZero() || !(Secret{}).IsZero() || (Secret{}).Reveal() != "" {
		t.Error("an empty Secret must be zero and reveal nothing")
	}
}

func TestSecretNeverPrintedByFmt(t *testing.T) {
	s := NewSecret(planted)
	c := Credentials{Username: "u@example.com", Password: s, Source: SourceFile, Path: "/x"}
	// A Secret in an unexported field: fmt cannot call its methods there,
	// so only the pointer indirection keeps the text out.
	type hidden struct{ c Credentials }
	values := map[string]any{
		"Secret":      s,
		"*Secret":     &s,
		"Credentials": c,
		"*Credential": &c,
		"unexported":  hidden{c},
		"slice":       []Secret{s},
		"map":         map[string]Secret{"pw": s},
	}
	verbs := []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s", "%T"}
	for name, v := range values {
		for _, verb := range verbs {
			assertNoLeak(t, name+" "+verb, fmt.Sprintf(verb, v))
		}
		assertNoLeak(t, name+" Sprint", fmt.Sprint(v))
		assertNoLeak(t, name+" Sprintln", fmt.Sprintln(v))
	}
	if got := fmt.Sprintf("%v|%#v|%s", s, s, s); got != "[redacted]|[redacted]|[redacted]" {
		t.Errorf("Secret prints as %q", got)
	}
}

func TestSecretNeverInJSONOrSlog(t *testing.T) {
	s := NewSecret(planted)
	c := Credentials{Username: "u@example.com", Password: s, Source: SourceSystemd}
	b, err := json.Marshal(map[string]any{"c": c, "p": &c, "s": s})
	if err != nil {
		t.Fatal(err)
	}
	assertNoLeak(t, "json", string(b))
	if !strings.Contains(string(b), `"Password":"[redacted]"`) {
		t.Errorf("json = %s, want the password field shown as [redacted]", b)
	}
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		l := slog.New(h)
		l.Info("login", "password", s, "creds", c, "ptr", &c)
		l.Info("group", slog.Group("g", slog.Any("pw", s)))
		l.With("pw", s).Warn("with")
	}
	assertNoLeak(t, "slog", buf.String())
	if !strings.Contains(buf.String(), "password=[redacted]") {
		t.Errorf("slog text output lacks password=[redacted]:\n%s", buf.String())
	}
}
