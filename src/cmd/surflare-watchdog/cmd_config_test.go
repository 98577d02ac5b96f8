package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"surflare-watchdog/src/testenv"
	"testing"
)

func moduleRoot(t *testing.T) string { return testenv.RepoRoot(t) }

func runConfigCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = configMain(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestConfigCheckDefaultFile(t *testing.T) {
	path := filepath.Join(moduleRoot(t), "files", "etc", "config", "surflare")
	code, out, errOut := runConfigCLI("check", "--config", path)
	if code != exitOK || !strings.Contains(out, "valid") || errOut != "" {
		t.Errorf("config check on the default file: code=%d out=%q err=%q", code, out, errOut)
	}
}

func TestConfigCheckBrokenFileListsEveryError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surflare")
	os.WriteFile(path, []byte(`config surflare 'main'
	option check_interval 'abc'
	option mystery '1'

config loopguard 'loopguard'
	option ratio '150'

config web 'web'
	option port 'http'
`), 0o600)
	code, out, errOut := runConfigCLI("check", "--config", path)
	if code != exitFailure || out != "" {
		t.Errorf("code=%d stdout=%q, want 1 and nothing on stdout", code, out)
	}
	want := []string{
		"warning: " + path + ":3: main.mystery: unknown option (ignored)",
		"1 warning: what it names is IGNORED (the default applies instead); fix it or remove it",
		path + `:2: main.check_interval: "abc" is not a number of seconds`,
		path + ":6: loopguard.ratio: 150 is too large: must be at most 100",
		path + `:9: web.port: "http" is not a whole number`,
		"3 errors",
	}
	if got := strings.Split(strings.TrimSpace(errOut), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut, strings.Join(want, "\n"))
	}
}

// A misspelled option loads (exit 0) but is named loudly, with its line and
// the schema's spelling; --strict makes it fail for scripts.
func TestConfigCheckMisspelledOptionSuggests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surflare")
	os.WriteFile(path, []byte("config surflare 'main'\n\toption node 'Dallas'\n\tlist candiate 'Miami'\n"), 0o600)
	code, out, errOut := runConfigCLI("check", "--config", path)
	want := "warning: " + path + `:3: main.candiate: unknown option — did you mean "candidate"? (ignored)` + "\n"
	if code != exitOK || !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, "IGNORED") {
		t.Errorf("code=%d stderr=%q, want 0 and it to start with %q", code, errOut, want)
	}
	if !strings.Contains(out, "valid; warnings on stderr: 1") {
		t.Errorf("stdout %q does not point at the warning", out)
	}
	if code, _, _ := runConfigCLI("check", "--strict", "--config", path); code != exitFailure {
		t.Errorf("check --strict with a warning: code=%d, want %d", code, exitFailure)
	}
}

func TestConfigCheckMissingFile(t *testing.T) {
	code, _, errOut := runConfigCLI("check", "--config", filepath.Join(t.TempDir(), "absent"))
	if code != exitFailure || !strings.Contains(errOut, "no such file") {
		t.Errorf("code=%d err=%q", code, errOut)
	}
}

func TestConfigShow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surflare")
	os.WriteFile(path, []byte("config surflare 'main'\n\toption node 'Miami'\n"), 0o600)
	code, out, _ := runConfigCLI("show", "--config", path)
	if code != exitOK || !strings.Contains(out, "\toption node 'Miami'\n") || !strings.Contains(out, "\toption check_interval '30'\n") {
		t.Errorf("show: code=%d out:\n%s", code, out)
	}
	code, out, _ = runConfigCLI("show", "--json", "--config", path)
	if code != exitOK || !strings.Contains(out, `"node": "Miami"`) || !strings.Contains(out, `"check_interval": "30s"`) {
		t.Errorf("show --json: code=%d out:\n%s", code, out)
	}
}

func TestConfigHelpAndUsage(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"check", "--help"}, {"show", "-h"}} {
		code, out, _ := runConfigCLI(args...)
		if code != exitOK || !strings.HasPrefix(out, "Usage: surflare-watchdog config") {
			t.Errorf("%v: code=%d out=%q", args, code, out)
		}
	}
	for _, args := range [][]string{{}, {"frob"}, {"check", "--bogus"}, {"check", "extra"}} {
		if code, _, errOut := runConfigCLI(args...); code != exitUsage || !strings.Contains(errOut, "Usage") && !strings.Contains(errOut, "unexpected") {
			t.Errorf("%v: code=%d err=%q, want a usage error", args, code, errOut)
		}
	}
}
