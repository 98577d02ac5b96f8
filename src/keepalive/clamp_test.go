package keepalive

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Values no kernel default or Go default shares, so a match proves the
// program set them.
var testCfg = Config{Idle: 37 * time.Second, Interval: 11 * time.Second, Count: 4}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates cgroups and loads BPF programs")
	}
}

var cgroupSeq atomic.Int32

// testCgroup returns a unique cgroup path under the cgroup2 mount and makes
// sure it is gone when the test ends, also on failure.
func testCgroup(t *testing.T) string {
	t.Helper()
	mnt, err := cgroup2Mount(mountinfoPath)
	if err != nil {
		t.Skipf("needs cgroup2: %v", err)
	}
	path := filepath.Join(mnt, fmt.Sprintf("surflare-ka-test-%d-%d", os.Getpid(), cgroupSeq.Add(1)))
	t.Cleanup(func() {
		if err := CleanupStale(path); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return path
}

// newClamp starts a clamp on a fresh test cgroup and closes it at the end.
func newClamp(t *testing.T) (*Clamp, Config) {
	t.Helper()
	cfg := testCfg
	cfg.CgroupPath = testCgroup(t)
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, cfg
}

func TestProbe(t *testing.T) {
	needRoot(t)
	if err := Probe(); err != nil {
		t.Fatalf("Probe on this kernel: %v", err)
	}
	noCgroup2 := filepath.Join(t.TempDir(), "mountinfo")
	os.WriteFile(noCgroup2, []byte("22 1 0:21 / /proc rw - proc proc rw\n25 1 0:23 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"), 0o600)
	if err := probe(noCgroup2); err == nil || !strings.Contains(err.Error(), "cgroup2 is not mounted") {
		t.Fatalf("probe without a cgroup2 mount = %v, want it to say cgroup2 is not mounted", err)
	}
}

// The core case: a process in the cgroup gets the configured
// keepalive on connections it makes and accepts, one outside does not.
func TestClampAppliesInsideCgroupOnly(t *testing.T) {
	needRoot(t)
	c, cfg := newClamp(t)
	want := keepOpts{KeepAlive: 1, Idle: 37, Interval: 11, Count: 4}

	inside := startHelper(t, "sockets", true)
	if err := c.AddPID(inside.pid()); err != nil {
		t.Fatalf("AddPID: %v", err)
	}
	if got := cgroupOf(t, inside.pid()); !strings.HasSuffix(cfg.CgroupPath, got) {
		t.Fatalf("helper is in %s, want %s", got, cfg.CgroupPath)
	}
	rep := inside.sockets(t)
	ownNetns, _ := os.Readlink("/proc/self/ns/net")
	if rep.Netns == "" || rep.Netns == ownNetns {
		t.Fatalf("helper netns %q, want a fresh one (ours is %q)", rep.Netns, ownNetns)
	}
	for _, end := range []string{"v4 active", "v4 passive", "v6 active", "v6 passive"} {
		if got := rep.Opts[end]; got != want {
			t.Errorf("inside, %s: got %+v, want %+v", end, got, want)
		}
	}
	// Go's dialer re-applies 15 s / 15 s / 9 after connect; the cap keeps
	// the more eager idle and brings the rest down to ours.
	if got, w := rep.Opts["go dialer"], (keepOpts{1, 15, 11, 4}); got != w {
		t.Errorf("inside, Go dialer: got %+v, want %+v", got, w)
	}
	st := c.Status()
	// 2 raw pairs and the Go pair, both ends each.
	if !st.Active || !st.Capped || st.Sockets != 6 || st.Failures != 0 {
		t.Errorf("Status after 6 connection ends = %+v, want active, capped, 6 sockets, 0 failures", st)
	}

	outside := startHelper(t, "sockets", true)
	rep = outside.sockets(t)
	for _, end := range []string{"v4 active", "v4 passive", "v6 active", "v6 passive"} {
		got := rep.Opts[end]
		if got.KeepAlive != 0 || got.Idle == want.Idle || got.Interval == want.Interval || got.Count == want.Count {
			t.Errorf("outside, %s: got %+v, want keepalive off and kernel defaults", end, got)
		}
	}
	if got, w := rep.Opts["go dialer"], (keepOpts{1, 15, 15, 9}); got != w {
		t.Errorf("outside, Go dialer: got %+v, want Go's own %+v", got, w)
	}
	if n := c.Status().Sockets; n != 6 {
		t.Errorf("sockets outside the cgroup were counted: %d, want 6", n)
	}
}

func TestCloseDetachesAndRemovesCgroup(t *testing.T) {
	needRoot(t)
	c, cfg := newClamp(t)
	proxy := startHelper(t, "sleep", false)
	home := cgroupOf(t, os.Getpid())
	if err := c.AddPID(proxy.pid()); err != nil {
		t.Fatal(err)
	}
	ids := attachedPrograms(t, cfg.CgroupPath)
	if len(ids) != 2 {
		t.Fatalf("programs attached to the cgroup: %v, want the sock_ops and the setsockopt one", ids)
	}

	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(cfg.CgroupPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cgroup still there after Close: %v", err)
	}
	if got := cgroupOf(t, proxy.pid()); got != home {
		t.Errorf("proxy moved to %s on Close, want back to %s", got, home)
	}
	for _, id := range ids {
		if fd, err := progFDByID(id); err == nil {
			unix.Close(fd)
			t.Errorf("program %d still loaded after Close", id)
		}
	}
	if st := c.Status(); st.Active || st.Reason != "stopped" {
		t.Errorf("Status after Close = %+v, want inactive, stopped", st)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.AddPID(proxy.pid()); err != nil {
		t.Errorf("AddPID after Close: %v, want a no-op", err)
	}
}

// A watchdog killed with the proxy in its group leaves the group behind;
// CleanupStale at the next start removes it, along with a program attached
// the legacy way (kernels without bpf_link keep those after a crash).
func TestCleanupStaleAfterCrash(t *testing.T) {
	needRoot(t)
	path := testCgroup(t)
	proxy := startHelper(t, "sleep", false)
	home := cgroupOf(t, os.Getpid())
	wd := startHelper(t, "crash", false, helperCgroupEnv+"="+path, fmt.Sprintf("%s=%d", helperPIDEnv, proxy.pid()))
	if got := wd.line(t); got != "ready" {
		t.Fatalf("crash helper said %q", got)
	}
	wd.cmd.Process.Kill()
	wd.cmd.Wait()
	if got := cgroupOf(t, proxy.pid()); !strings.HasSuffix(path, got) {
		t.Fatalf("proxy in %s after the crash, want still in %s", got, path)
	}

	legacyID := attachLegacy(t, path)
	if err := CleanupStale(path); err != nil {
		t.Fatalf("CleanupStale: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cgroup still there after CleanupStale: %v", err)
	}
	if got := cgroupOf(t, proxy.pid()); got != home {
		t.Errorf("proxy in %s after CleanupStale, want %s", got, home)
	}
	if fd, err := progFDByID(legacyID); err == nil {
		unix.Close(fd)
		t.Errorf("legacy-attached program %d still loaded after CleanupStale", legacyID)
	}
	if err := CleanupStale(path); err != nil {
		t.Errorf("CleanupStale with nothing left: %v", err)
	}
}

// New takes over a group left behind, dropping the stale programs in it.
func TestNewTakesOverStaleCgroup(t *testing.T) {
	needRoot(t)
	path := testCgroup(t)
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	legacyID := attachLegacy(t, path)
	cfg := testCfg
	cfg.CgroupPath = path
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New over a stale group: %v", err)
	}
	defer c.Close()
	ids := attachedPrograms(t, path)
	if len(ids) != 2 || ids[0] == legacyID || ids[1] == legacyID {
		t.Errorf("programs on the group: %v, want ours only (stale one was %d)", ids, legacyID)
	}
}

// Without cgroup2 the clamp says so, once, and everything else carries on.
func TestUnavailableWithoutCgroup2(t *testing.T) {
	var logs bytes.Buffer
	cfg := testCfg
	cfg.CgroupPath = filepath.Join(t.TempDir(), "surflare-proxy") // tmpfs or ext4, not cgroup2
	cfg.Log = slog.New(slog.NewTextHandler(&logs, nil))
	c, err := New(cfg)
	if err == nil {
		t.Fatal("New on a plain directory succeeded")
	}
	if !errors.Is(err, ErrUnavailable) || !strings.HasPrefix(err.Error(), "keepalive clamp unavailable: ") ||
		!strings.Contains(err.Error(), "is not on a cgroup2 mount") {
		t.Errorf("error = %q, want \"keepalive clamp unavailable: … is not on a cgroup2 mount\"", err)
	}
	if _, err := os.Stat(cfg.CgroupPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("New left %s behind: %v", cfg.CgroupPath, err)
	}
	st := c.Status()
	if st.Active || !strings.Contains(st.Reason, "is not on a cgroup2 mount") || st.Idle != 37*time.Second {
		t.Errorf("Status = %+v, want inactive with the reason and the configured values", st)
	}
	if err := c.AddPID(os.Getpid()); err != nil {
		t.Errorf("AddPID on an unavailable clamp: %v, want a no-op", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close on an unavailable clamp: %v", err)
	}
	c.Status()
	if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "Keepalive clamp unavailable") {
		t.Errorf("log = %q, want exactly one unavailable line", logs.String())
	}
}

// attachedPrograms lists the program IDs attached to the cgroup at path.
func attachedPrograms(t *testing.T, path string) []uint32 {
	t.Helper()
	cg, err := openCgroup(path)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(cg)
	var ids []uint32
	for _, at := range []uint32{unix.BPF_CGROUP_SOCK_OPS, unix.BPF_CGROUP_SETSOCKOPT} {
		progs, err := queryCgroup(cg, at)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range progs {
			ids = append(ids, p.id)
		}
	}
	return ids
}

// attachLegacy attaches our sock_ops program with BPF_PROG_ATTACH, as
// kernels without bpf_link do, and lets go of it: such an attachment
// outlives its process.
func attachLegacy(t *testing.T, path string) uint32 {
	t.Helper()
	m, err := createCounters()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(m)
	prog, err := loadProgram(opsProgram(testCfg, m))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(prog)
	cg, err := openCgroup(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := progAttachCgroup(cg, prog, unix.BPF_CGROUP_SOCK_OPS)
	if err != nil {
		t.Fatalf("legacy attach: %v", err)
	}
	// What a crash does: the fds go, the attachment stays.
	unix.Close(a.prog)
	unix.Close(a.cgroup)
	info, err := progInfoOf(prog)
	if err != nil {
		t.Fatal(err)
	}
	return info.ID
}
