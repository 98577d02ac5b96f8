package preflight

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"surflare-watchdog/src/credentials"
)

// host is a fake filesystem of absolute paths.
func host(files map[string]string, modes map[string]fs.FileMode) Probes {
	m := fstest.MapFS{}
	for p, c := range files {
		mode := fs.FileMode(0o644)
		if md, ok := modes[p]; ok {
			mode = md
		}
		m[strings.TrimPrefix(p, "/")] = &fstest.MapFile{Data: []byte(c), Mode: mode}
	}
	return Probes{
		Stat:     func(p string) (fs.FileInfo, error) { return fs.Stat(m, strings.TrimPrefix(p, "/")) },
		ReadFile: func(p string) ([]byte, error) { return fs.ReadFile(m, strings.TrimPrefix(p, "/")) },
		WAN:      func(context.Context) (string, error) { return "pppoe-wan", nil },
		Release:  "6.6.0",
		Now:      func() time.Time { return time.Unix(1e9, 0) },
	}
}

const cgroupMounted = "30 1 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"

func healthy() Probes {
	return host(map[string]string{
		"/usr/bin/surflare":          "#!/bin/sh\n",
		"/proc/self/mountinfo":       cgroupMounted,
		"/proc/sys/kernel/osrelease": "6.6.0\n",
	}, map[string]fs.FileMode{"/usr/bin/surflare": 0o755})
}

func TestHealthyRouterHasNoFindings(t *testing.T) {
	r := Run(context.Background(), Input{VendorBin: "/usr/bin/surflare", Router: true}, healthy())
	if len(r.Findings) != 0 || !r.OK() || r.Why() != "" {
		t.Fatalf("findings on a healthy router: %+v", r.Findings)
	}
	if !r.At.Equal(time.Unix(1e9, 0)) {
		t.Errorf("At from the injected clock: %v", r.At)
	}
}

func TestMissingVendorClientIsTheBlocker(t *testing.T) {
	p := healthy()
	r := Run(context.Background(), Input{VendorBin: "/usr/bin/surflare-missing"}, p)
	f, ok := r.Blocker()
	if !ok || f.Check != CheckVendor {
		t.Fatalf("want the vendor blocker: %+v", r.Findings)
	}
	if want := "Surflare client not found at /usr/bin/surflare-missing — install the Surflare client first"; !strings.HasPrefix(r.Why(), want) {
		t.Errorf("why line %q; want prefix %q", r.Why(), want)
	}
}

func TestVendorClientNotExecutable(t *testing.T) {
	p := host(map[string]string{"/usr/bin/surflare": "x", "/proc/self/mountinfo": cgroupMounted}, nil)
	r := Run(context.Background(), Input{VendorBin: "/usr/bin/surflare"}, p)
	f, ok := r.Blocker()
	if !ok || f.Check != CheckVendor || !strings.Contains(f.Fix, "chmod +x /usr/bin/surflare") {
		t.Fatalf("non-executable client: %+v", r.Findings)
	}
}

func TestConfigErrorComesFirst(t *testing.T) {
	p := host(map[string]string{"/proc/self/mountinfo": cgroupMounted}, nil)
	in := Input{ConfigPath: "/etc/config/surflare", ConfigErr: errors.New("/etc/config/surflare:12: main.mode: unknown mode"), VendorBin: "/usr/bin/surflare"}
	r := Run(context.Background(), in, p)
	f, _ := r.Blocker()
	if f.Check != CheckConfig || !strings.Contains(f.Detail, ":12:") {
		t.Fatalf("config first, with the line in details: %+v", r.Findings)
	}
	if len(r.Findings) != 2 {
		t.Errorf("every check still runs (config and vendor): %+v", r.Findings)
	}
}

func TestCredentials(t *testing.T) {
	dir := t.TempDir()
	opts := credentials.Options{Username: "you@example.com", File: filepath.Join(dir, "credentials"), ConfigFile: filepath.Join(dir, "surflare")}
	r := Run(context.Background(), Input{Credentials: &opts}, healthy())
	f, ok := r.Blocker()
	if !ok || f.Check != CheckCredentials || f.Why != "No Surflare account is set up on this router" {
		t.Fatalf("no password file: %+v", r.Findings)
	}
	if err := credentials.WriteFile(context.Background(), opts.File, credentials.NewSecret("hunter2hunter2")); err != nil {
		t.Fatal(err)
	}
	if r := Run(context.Background(), Input{Credentials: &opts}, healthy()); !r.OK() {
		t.Fatalf("with a password: %+v", r.Findings)
	}
	opts.Username = ""
	if f, ok := Run(context.Background(), Input{Credentials: &opts}, healthy()).Blocker(); !ok || f.Why != "The Surflare account is incomplete" {
		t.Fatalf("no username: %+v", f)
	}
}

func TestNoWAN(t *testing.T) {
	p := healthy()
	p.WAN = func(context.Context) (string, error) { return "", errors.New("no default route") }
	f, ok := Run(context.Background(), Input{}, p).Blocker()
	if !ok || f.Check != CheckWAN || f.Detail != "no default route" {
		t.Fatalf("no WAN: %+v", f)
	}
}

func TestKernelModules(t *testing.T) {
	files := map[string]string{
		"/proc/self/mountinfo":               cgroupMounted,
		"/lib/modules/6.6.0/modules.builtin": "kernel/net/netfilter/nft_socket.ko\n",
		"/proc/modules":                      "nf_conntrack_netlink 49152 0 - Live 0x0\n",
	}
	f, ok := Run(context.Background(), Input{Router: true}, host(files, nil)).Blocker()
	if !ok || f.Check != CheckKernel || !strings.Contains(f.Fix, "opkg install kmod-nft-tproxy") || strings.Contains(f.Fix, "socket") {
		t.Fatalf("nft_tproxy missing: %+v", f)
	}
	files["/lib/modules/6.6.0/nft_tproxy.ko"] = ""
	if r := Run(context.Background(), Input{Router: true}, host(files, nil)); !r.OK() {
		t.Fatalf("an installed module loads on first use: %+v", r.Findings)
	}
	// A laptop needs no LAN modules; a kernel without modules.builtin is not judged.
	delete(files, "/lib/modules/6.6.0/nft_tproxy.ko")
	if r := Run(context.Background(), Input{Router: false}, host(files, nil)); !r.OK() {
		t.Fatalf("laptop: %+v", r.Findings)
	}
	delete(files, "/lib/modules/6.6.0/modules.builtin")
	if r := Run(context.Background(), Input{Router: true}, host(files, nil)); !r.OK() {
		t.Fatalf("no modules.builtin: %+v", r.Findings)
	}
}

func TestNoCgroup2IsOnlyAWarning(t *testing.T) {
	p := host(map[string]string{"/proc/self/mountinfo": "22 1 0:21 / /proc rw - proc proc rw\n"}, nil)
	r := Run(context.Background(), Input{}, p)
	if !r.OK() || len(r.Findings) != 1 || r.Findings[0].Severity != Warning || r.Findings[0].Check != CheckCgroup {
		t.Fatalf("cgroup2 missing: %+v", r.Findings)
	}
}
