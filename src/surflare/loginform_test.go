package surflare

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// E10, the argv-only client: the terminal login gets a usage error, not a
// prompt. That is fatal (retrying changes nothing) and the error says which
// option fixes it and what it costs; the password is never put on a command
// line without the owner's say.
func TestPTYLoginOnArgvOnlyClientSaysSetArgv(t *testing.T) {
	bin, dir := fakeCLI(t, `echo '✘ -p PASSWORD is required' >&2; exit 2`)
	err := New(Options{Bin: bin, Username: "a@b.c", Password: pw}).Login(context.Background())
	if !IsFatal(err) || !strings.Contains(err.Error(), "set auth.login_mode to 'argv'") {
		t.Fatalf("err = %v, want fatal with the login_mode advice", err)
	}
	if args := readArgs(t, dir); slices.Contains(args, secret) {
		t.Errorf("the password went on the command line: %q", args)
	}
	// A real failure after a prompt is not taken for it.
	bin, _ = fakeCLI(t, `printf 'Password: ' > /dev/tty; IFS= read -r pw < /dev/tty; echo 'network error: -p retry required'; exit 1`)
	if err := New(Options{Bin: bin, Username: "a@b.c", Password: pw}).Login(context.Background()); err == nil || IsFatal(err) {
		t.Errorf("a failed login after the prompt: %v, want retryable", err)
	}
}

// E10, the prompt-only client: argv mode's -p is an unknown flag; the
// login goes ahead on the terminal, which is the safer form anyway.
func TestArgvLoginOnPromptOnlyClientUsesTheTerminal(t *testing.T) {
	bin, dir := fakeCLI(t, `for a in "$@"; do [ "$a" = "-p" ] && { echo 'flag provided but not defined: -p' >&2; exit 2; }; done
printf 'Password: ' > /dev/tty
IFS= read -r pw < /dev/tty
if [ "$pw" = "`+secret+`" ]; then echo 'Logged in'; exit 0; fi
echo 'invalid username/password'; exit 1`)
	if err := New(Options{Bin: bin, LoginMode: LoginArgv, Username: "a@b.c", Password: pw}).Login(context.Background()); err != nil {
		t.Fatalf("argv login on a prompt-only client: %v", err)
	}
	if args := readArgs(t, dir); !slices.Equal(args, []string{"login", "-u", "a@b.c", "--remember"}) {
		t.Errorf("last call argv = %q, want the terminal form", args)
	}
}
