package surflare

import "strings"

// The two login forms (E10): `login -u EMAIL -p PASSWORD` and a terminal
// prompt. The evidence shows the first; the seed design implies the
// second. A client may have only one, and says so as a usage error before
// it ever reaches the account API. These tell such an answer from a
// failed login, so the daemon does not retry a form the client lacks.

// noArgvForm: the CLI rejected -p as an unknown flag (the prompt-only
// client).
func noArgvForm(r result) bool {
	if r.code == 0 || r.timedOut {
		return false
	}
	out := strings.ToLower(r.out)
	return strings.Contains(out, "-p") &&
		(strings.Contains(out, "not defined") || strings.Contains(out, "unknown flag") || strings.Contains(out, "unknown shorthand"))
}

// noPromptForm: without -p the CLI exited asking for it instead of
// prompting (the argv-only client).
func noPromptForm(r result) bool {
	if r.code == 0 || r.timedOut {
		return false
	}
	out := strings.ToLower(r.out)
	return strings.Contains(out, "-p") && strings.Contains(out, "required") && !strings.Contains(out, "password:")
}
