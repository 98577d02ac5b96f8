package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// A mistyped subcommand is refused (exit 2) with the one it is closest to.
func TestUnknownSubcommandSuggests(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch([]string{"stauts"}, &out, &errb); code != exitUsage {
		t.Errorf("stauts: exit %d, want %d", code, exitUsage)
	}
	if want := `surflare-watchdog: unknown command "stauts" — did you mean "status"?`; !strings.HasPrefix(errb.String(), want) {
		t.Errorf("stderr starts %q, want %q", errb.String(), want)
	}
	errb.Reset()
	if code := configMain([]string{"chek"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), `unknown subcommand "chek" — did you mean "check"?`) {
		t.Errorf("config chek: exit %d, stderr %q", code, errb.String())
	}
	// Nothing close: the refusal stands alone, with the list of commands.
	errb.Reset()
	dispatch([]string{"xyzzy"}, &out, &errb)
	if s := errb.String(); strings.Contains(s, "did you mean") || !strings.Contains(s, "Commands:") {
		t.Errorf("xyzzy: stderr %q", s)
	}
}

// A mistyped flag names the flag it is closest to, before or after the
// positional arguments.
func TestUnknownFlagSuggests(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"--jsno"}, {"Los Angeles", "--jsno"}, {"-jsno", "Dallas"}} {
		code, out, errOut := runDaemonCLI("rotate", append([]string{"--run-dir", dir}, args...)...)
		if want := "surflare-watchdog rotate: unknown flag --jsno — did you mean \"--json\"?\n"; code != exitUsage || !strings.HasPrefix(errOut, want) || out != "" {
			t.Errorf("rotate %q: exit %d, stderr %q, want %d and %q first", args, code, errOut, exitUsage, want)
		}
	}
	var out, errb bytes.Buffer
	firewallMain(context.Background(), []string{"plan", "--confg", "x"}, &out, &errb)
	if !strings.Contains(errb.String(), `unknown flag --confg — did you mean "--config"?`) {
		t.Errorf("firewall plan --confg: stderr %q", errb.String())
	}
}

// Flags may follow the positional argument: rotate "Los Angeles" --json
// sends that node and prints JSON; "--" ends the flags.
func TestFlagAfterPositional(t *testing.T) {
	f, dir := startFakeDaemon(t)
	code, out, errOut := runDaemonCLI("rotate", "Los Angeles", "--run-dir", dir, "--json")
	if code != exitOK || f.last().Args["node"] != "Los Angeles" {
		t.Fatalf("rotate NODE --run-dir D --json: exit %d, sent %+v, stderr %q", code, f.last(), errOut)
	}
	if strings.TrimSpace(out) != "null" {
		t.Errorf("rotate ... --json printed %q, want the daemon's (empty) answer as JSON", out)
	}
	if code, _, errOut := runDaemonCLI("rotate", "--run-dir", dir, "--", "--json"); code != exitOK || f.last().Args["node"] != "--json" {
		t.Errorf(`rotate -- --json: exit %d, sent %+v, stderr %q; after "--" it is a node name`, code, f.last(), errOut)
	}
	if code, _, _ := runDaemonCLI("status", "--run-dir", dir, "extra", "--json"); code != exitUsage {
		t.Errorf("status extra --json: exit %d, want %d (status takes no argument)", code, exitUsage)
	}
}

// Every subcommand takes --config, those that do not read it too
// (firewall status and teardown refused it).
func TestConfigFlagEverywhere(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "surflare")
	for _, args := range [][]string{
		{"status", "--config", cfg, "--help"},
		{"teardown", "--config", cfg, "--help"},
		{"trace", "stop", "--config", cfg, "--help"},
	} {
		var out, errb bytes.Buffer
		code := firewallMain(context.Background(), args, &out, &errb)
		if code != exitOK || errb.Len() != 0 || !strings.Contains(out.String(), "-config") {
			t.Errorf("firewall %v: exit %d, stderr %q", args, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := teardownMain(context.Background(), []string{"--config", cfg, "-h"}, &out, &errb); code != exitOK {
		t.Errorf("teardown --config F -h: exit %d, stderr %q", code, errb.String())
	}
}
