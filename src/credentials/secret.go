package credentials

import (
	"fmt"
	"io"
	"log/slog"
)

// Redacted is what a Secret prints as, whatever prints it.
const Redacted = "[redacted]"

// Secret holds a password so that it cannot leak by accident: fmt (every
// verb, %#v included), log/slog, encoding/json and encoding.TextMarshaler
// users all see Redacted. The text sits behind a *string: where fmt cannot
// call the methods (a Secret inside an unexported field) it falls back to
// reflection, which prints a pointer to a string as an address — a pointer
// to a struct it would dereference and print. Only Reveal returns the
// text; grep for Reveal to audit where the password goes.
type Secret struct{ p *string }

// NewSecret wraps a password.
func NewSecret(s string) Secret {
	if s == "" {
		return Secret{}
	}
	return Secret{&s}
}

// Reveal returns the password. Call it only where the password must be
// handed on (the vendor CLI's prompt, systemd-creds' stdin, the file).
func (s Secret) Reveal() string {
	if s.p == nil {
		return ""
	}
	return *s.p
}

// IsZero reports whether there is no password.
func (s Secret) IsZero() bool { return s.p == nil || *s.p == "" }

// String implements fmt.Stringer.
func (s Secret) String() string { return Redacted }

// GoString implements fmt.GoStringer (%#v).
func (s Secret) GoString() string { return Redacted }

// Format implements fmt.Formatter, so that verbs that would otherwise bypass
// String (%d, %x on a struct, %T aside) print Redacted too.
func (s Secret) Format(f fmt.State, verb rune) { io.WriteString(f, Redacted) }

// MarshalJSON implements json.Marshaler: a Secret is always "[redacted]".
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

// MarshalText implements encoding.TextMarshaler, used by slog's text
// handler, encoding/xml and most encoders of map keys.
func (s Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }
