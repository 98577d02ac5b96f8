package control

import (
	"bytes"
	"strings"
	"testing"
)

// `status` starts with the why line: the one thing a person reads first.
func TestWriteTextPutsWhyFirst(t *testing.T) {
	var b bytes.Buffer
	WriteText(&b, []byte(`{"state":"blocked","node":"Dallas","why":{"line":"Surflare client not found at /usr/bin/surflare — install it first","severity":"action","detail":"state=blocked"}}`))
	first, _, _ := strings.Cut(b.String(), "\n")
	if first != "why: Surflare client not found at /usr/bin/surflare — install it first" {
		t.Errorf("status text starts %q:\n%s", first, b.String())
	}
}
