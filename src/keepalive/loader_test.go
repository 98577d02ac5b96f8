package keepalive

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A program the verifier refuses comes back with what the verifier said:
// here a return value never set.
func TestBadProgramErrorCarriesVerifierLog(t *testing.T) {
	needRoot(t)
	spec := returnOne()
	spec.insns = []insn{exit()} // r0 is never written
	fd, err := loadProgram(spec)
	if err == nil {
		unix.Close(fd)
		t.Fatal("the kernel loaded a program that returns an unset r0")
	}
	var verr *verifierError
	if !errors.As(err, &verr) || !errors.Is(err, unix.EACCES) {
		t.Fatalf("error %v (%T), want a *verifierError with EACCES", err, err)
	}
	if !strings.Contains(verr.log, "R0 !read_ok") || !strings.Contains(verr.log, "(95) exit") {
		t.Errorf("verifier log %q, want the refused exit and R0 !read_ok", verr.log)
	}
	if !strings.Contains(err.Error(), "R0 !read_ok") {
		t.Errorf("error text %q does not say what the verifier refused", err)
	}
	// The same in the clamp's words, as Status and the log show it.
	if msg := explainBPF(err).Error(); !strings.Contains(msg, "permission denied (verifier: ") {
		t.Errorf("explained: %q", msg)
	}
}

// A kernel without a program type refuses it before verifying; that is
// "kernel too old", not a verifier complaint. An unknown helper is the
// same for the helper probe, which on this kernel finds bpf_setsockopt.
func TestMissingKernelPiecesAreNamed(t *testing.T) {
	needRoot(t)
	spec := returnOne()
	spec.progType = 0x7fff // no kernel has it
	if fd, err := loadProgram(spec); err == nil {
		unix.Close(fd)
		t.Fatal("loaded a program of an unknown type")
	} else if msg := explainBPF(err).Error(); !errors.Is(err, errNotSupported) || !strings.Contains(msg, "kernel too old or built without cgroup BPF") {
		t.Errorf("unknown program type: %q, want it to say the kernel is too old", msg)
	}

	if fd, err := createMap(0x7fff, 4, 8, 1, "x"); err == nil {
		unix.Close(fd)
		t.Fatal("created a map of an unknown type")
	} else if !errors.Is(err, errNotSupported) {
		t.Errorf("unknown map type: %v, want errNotSupported", err)
	}

	if err := haveHelper(bpfFuncSetsockopt); err != nil {
		t.Errorf("bpf_setsockopt probe on this kernel: %v", err)
	}
	if err := haveHelper(0x7fff); !errors.Is(err, errNotSupported) {
		t.Errorf("probe of a helper no kernel has: %v, want errNotSupported", err)
	}
	// BPF_FUNC_skb_store_bytes exists, but only for programs on packets.
	if err := haveHelper(9); !errors.Is(err, errNotSupported) {
		t.Errorf("probe of a packet-only helper: %v, want errNotSupported", err)
	}
}

// detachStale leaves programs that a live owner attached through a link:
// a second watchdog's CleanupStale must not take a running clamp's
// programs away (its own are removed when it exits).
func TestDetachStaleLeavesLinkedPrograms(t *testing.T) {
	needRoot(t)
	_, cfg := newClamp(t)
	before := attachedPrograms(t, cfg.CgroupPath)
	if len(before) != 2 {
		t.Fatalf("programs attached: %v, want 2", before)
	}
	if err := detachStale(cfg.CgroupPath); err != nil {
		t.Fatalf("detachStale: %v", err)
	}
	if after := attachedPrograms(t, cfg.CgroupPath); len(after) != 2 || after[0] != before[0] || after[1] != before[1] {
		t.Errorf("programs after detachStale: %v, want the live clamp's %v", after, before)
	}
}

// The legacy attachment (BPF_PROG_ATTACH, kernels before 5.7) clamps like
// the link does, counts, and is gone after close.
func TestLegacyAttachmentClampsAndDetaches(t *testing.T) {
	needRoot(t)
	path := testCgroup(t)
	if err := unix.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := createCounters()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(m)
	prog, err := loadProgram(opsProgram(testCfg, m))
	if err != nil {
		t.Fatal(err)
	}
	cg, err := openCgroup(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := progAttachCgroup(cg, prog, unix.BPF_CGROUP_SOCK_OPS)
	unix.Close(prog) // the attachment keeps its own
	if err != nil {
		t.Fatalf("legacy attach: %v", err)
	}
	defer a.close()

	h := startHelper(t, "sockets", true)
	if err := movePID(path, h.pid()); err != nil {
		t.Fatal(err)
	}
	rep := h.sockets(t)
	want := keepOpts{KeepAlive: 1, Idle: 37, Interval: 11, Count: 4}
	if got := rep.Opts["v4 active"]; got != want {
		t.Errorf("legacy-attached clamp: %+v, want %+v", got, want)
	}
	if clamped, failed, err := readCounters(m); err != nil || clamped != 6 || failed != 0 {
		t.Errorf("counters: %d clamped, %d failed, %v; want 6, 0", clamped, failed, err)
	}
	if err := a.close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if ids := attachedPrograms(t, path); len(ids) != 0 {
		t.Errorf("programs still attached after close: %v", ids)
	}
	if err := a.close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// A kernel before 5.11 says EPERM when RLIMIT_MEMLOCK is spent: the limit
// is raised and the call made once more. Other errors are not retried.
func TestMemlockRaisedOnlyWhenRefused(t *testing.T) {
	needRoot(t)
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old) })
	// A spent limit, as an old kernel would see it; lowering needs no
	// privilege, and neither does raising the soft limit back.
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 0, Max: old.Max}); err != nil {
		t.Fatal(err)
	}

	calls := 0
	if _, err := withMemlock(func() (int, error) { calls++; return -1, unix.ENOENT }); !errors.Is(err, unix.ENOENT) || calls != 1 {
		t.Errorf("ENOENT: %v after %d calls, want it after 1", err, calls)
	}
	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim)
	if lim.Cur != 0 {
		t.Errorf("limit raised to %+v without a refusal", lim)
	}

	calls = 0
	fd, err := withMemlock(func() (int, error) {
		if calls++; calls == 1 {
			return -1, unix.EPERM
		}
		return 42, nil
	})
	if fd != 42 || err != nil || calls != 2 {
		t.Errorf("EPERM then success: %d, %v after %d calls; want 42 after 2", fd, err, calls)
	}
	unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim)
	// Unlimited with CAP_SYS_RESOURCE, else up to the hard limit.
	if lim.Cur != unix.RLIM_INFINITY && lim.Cur != old.Max {
		t.Errorf("RLIMIT_MEMLOCK after a refusal: %+v, want unlimited or the hard limit %d", lim, old.Max)
	}
}
