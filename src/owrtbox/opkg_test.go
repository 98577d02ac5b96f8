package owrtbox

import (
	"reflect"
	"testing"
)

// opkg's report of an install with --force-depends, as the box prints it
// (satisfy_dependencies_for lists the missing packages as bare names).
const forcedInstall = `Installing surflare-watchdog (0.1.0-272) to root...
Configuring surflare-watchdog.
Collected errors:
 * resolve_conffiles: Existing conffile /etc/config/surflare is different from the conffile in the new package. The new conffile will be placed at /etc/config/surflare-opkg.
 * satisfy_dependencies_for: Cannot satisfy the following dependencies for surflare-watchdog:
 * 	kmod-nft-tproxy
 * 	kmod-inet-diag
 * 	libfoo (>= 2)
`

func TestUnexpectedMissing(t *testing.T) {
	if got, want := unexpectedMissing(forcedInstall), []string{"libfoo"}; !reflect.DeepEqual(got, want) {
		t.Errorf("unexpectedMissing = %q, want %q (the kmods are expected, the conffile note is not a dependency)", got, want)
	}
	if got := unexpectedMissing("Installing x (1) to root...\nConfiguring x.\n"); len(got) != 0 {
		t.Errorf("a clean install reports missing %q", got)
	}
}

func TestStatusInstalled(t *testing.T) {
	for status, want := range map[string]bool{
		"Package: x\nStatus: install user installed\n":      true,
		"Package: x\nStatus: install ok installed\n":        true,
		"Package: x\nStatus: install user half-installed\n": false,
		"Package: x\nStatus: deinstall ok config-files\n":   false,
		"": false,
	} {
		if got := statusInstalled.MatchString(status); got != want {
			t.Errorf("statusInstalled(%q) = %v, want %v", status, got, want)
		}
	}
}

func TestQuote(t *testing.T) {
	if got, want := Quote("it's"), `'it'\''s'`; got != want {
		t.Errorf("Quote = %s, want %s", got, want)
	}
}
