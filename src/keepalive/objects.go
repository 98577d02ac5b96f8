package keepalive

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// The BPF objects the clamp makes and finds: maps, programs, their
// attachments to cgroups. Everything is a file descriptor the caller closes
// (bpf() makes them close-on-exec, so the proxy never inherits one).

// Verifier log sizes: enough for the clamp's programs at log level 1 at
// first, grown while the kernel says the log did not fit (ENOSPC), up to
// what every kernel accepts (before 5.2 the limit was 16 MiB - 1).
const (
	verifierLogStart = 64 << 10
	verifierLogMax   = 8 << 20
)

// createMap makes a map and returns its fd.
func createMap(mapType, keySize, valueSize, maxEntries uint32, name string) (int, error) {
	attr := mapCreateAttr{MapType: mapType, KeySize: keySize, ValueSize: valueSize,
		MaxEntries: maxEntries, MapName: objName(name)}
	fd, err := withMemlock(func() (int, error) { return bpfCall(unix.BPF_MAP_CREATE, &attr) })
	switch {
	case err == nil:
		return fd, nil
	// EINVAL: a map type (or flag) the kernel does not know; E2BIG: an
	// attr longer than the kernel knows (map names came in 4.15).
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.E2BIG):
		return -1, fmt.Errorf("%w: %w", errNotSupported, err)
	}
	return -1, err
}

// lookupPerCPU reads a per-CPU map's value for key: one uint64 per
// possible CPU.
func lookupPerCPU(mapFD int, key uint32) ([]uint64, error) {
	n, err := possibleCPUs()
	if err != nil {
		return nil, err
	}
	// The kernel copies each CPU's value rounded up to 8 bytes; ours are 8.
	keyBuf, valBuf := make([]byte, 4), make([]byte, 8*n)
	nativeOrder.PutUint32(keyBuf, key)
	var bufs buffers
	defer bufs.release()
	attr := mapElemAttr{MapFD: uint32(mapFD), Key: bufs.ptr(keyBuf), Value: bufs.ptr(valBuf)}
	if _, err := bpfCall(unix.BPF_MAP_LOOKUP_ELEM, &attr); err != nil {
		return nil, err
	}
	vals := make([]uint64, n)
	for i := range vals {
		vals[i] = nativeOrder.Uint64(valBuf[8*i:])
	}
	return vals, nil
}

// possibleCPUs is how many CPUs the kernel may ever bring up, which is how
// many values a per-CPU map holds per key: one more than the highest CPU
// in /sys/devices/system/cpu/possible ("0-3", "0,2-3"). The kernel copies
// num_possible_cpus() values; a list with holes gets a few spare zeros.
var possibleCPUs = sync.OnceValues(func() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, fmt.Errorf("counting CPUs for the per-CPU counters: %w", err)
	}
	n, err := parseCPUList(string(b))
	if err != nil {
		return 0, fmt.Errorf("counting CPUs for the per-CPU counters: /sys/devices/system/cpu/possible: %w", err)
	}
	return n, nil
})

// parseCPUList returns one more than the highest CPU in a kernel CPU list
// ("0-3,5\n").
func parseCPUList(s string) (int, error) {
	highest := -1
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		first, err1 := strconv.Atoi(lo)
		last, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || first < 0 || last < first {
			return 0, fmt.Errorf("unreadable CPU list %q", s)
		}
		highest = max(highest, last)
	}
	return highest + 1, nil
}

// progSpec is a program to load.
type progSpec struct {
	name       string // as the kernel shows it; empty for probes
	progType   uint32
	attachType uint32 // expected_attach_type; the kernel checks it for some types
	insns      []insn
}

// verifierError is a program the kernel refused, with what the verifier
// said about it.
type verifierError struct {
	errno unix.Errno
	log   string // the verifier's whole log at level 1
}

// Error gives the errno and the end of the log, where the verifier says
// what it refused and at which instruction.
func (e *verifierError) Error() string {
	lines := strings.Split(strings.TrimSpace(e.log), "\n")
	// The statistics line ("processed 12 insns ...") comes after the
	// reason on newer kernels; it says nothing about the refusal.
	if n := len(lines); n > 1 && strings.HasPrefix(lines[n-1], "processed ") {
		lines = lines[:n-1]
	}
	if len(lines) > 2 {
		lines = lines[len(lines)-2:]
	}
	tail := strings.Join(lines, "; ")
	if tail == "" {
		return e.errno.Error()
	}
	return fmt.Sprintf("%v (verifier: %s)", e.errno, tail)
}

func (e *verifierError) Unwrap() error { return e.errno }

// loadProgram assembles and loads a program and returns its fd. The first
// load runs without a verifier log (most kernels spend the time formatting
// it even for a program they accept); a refused program is loaded again
// with the log, and the error is a *verifierError that carries it.
func loadProgram(spec progSpec) (int, error) {
	code, err := assemble(spec.insns, nativeOrder)
	if err != nil {
		return -1, err
	}
	license := []byte("GPL\x00") // bpf_setsockopt is GPL-only
	var bufs buffers
	defer bufs.release()
	attr := progLoadAttr{
		ProgType:           spec.progType,
		InsnCnt:            uint32(len(code) / insnSize),
		Insns:              bufs.ptr(code),
		License:            bufs.ptr(license),
		ProgName:           objName(spec.name),
		ExpectedAttachType: spec.attachType,
	}
	load := func() (int, error) {
		a := attr // bpfCall writes back into its attr
		return bpfCall(unix.BPF_PROG_LOAD, &a)
	}
	fd, err := withMemlock(load)
	if err == nil {
		return fd, nil
	}
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		return -1, err
	}
	var log []byte
	for size := verifierLogStart; ; size *= 2 {
		log = make([]byte, size)
		attr.LogLevel, attr.LogSize, attr.LogBuf = 1, uint32(size), bufs.ptr(log)
		if fd, err = load(); err == nil {
			return fd, nil // accepted this time
		}
		if !errors.Is(err, unix.ENOSPC) || size >= verifierLogMax {
			break
		}
	}
	text := cString(log)
	switch {
	// An attr longer than the kernel knows: too old for a field we set.
	case errors.Is(err, unix.E2BIG),
		// Refused before the verifier ran: an unknown program type, or an
		// expected attach type the kernel does not have for it.
		errors.Is(err, unix.EINVAL) && strings.TrimSpace(text) == "":
		return -1, fmt.Errorf("%w: %w", errNotSupported, err)
	}
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return -1, err
	}
	return -1, &verifierError{errno: errno, log: text}
}

// raiseMemlock lifts RLIMIT_MEMLOCK: to unlimited where the process may
// (CAP_SYS_RESOURCE), else the soft limit up to the hard one, which needs
// no privilege.
func raiseMemlock() error {
	err := unix.Prlimit(0, unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}, nil)
	if err == nil {
		return nil
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) != nil || lim.Cur >= lim.Max {
		return err
	}
	lim.Cur = lim.Max
	return unix.Setrlimit(unix.RLIMIT_MEMLOCK, &lim)
}

// withMemlock runs a bpf() call that allocates kernel memory. Kernels
// before 5.11 charge maps and programs to RLIMIT_MEMLOCK (often 64 KiB) and
// say EPERM when it is spent; later ones charge the memory cgroup and
// ignore the limit. So the limit is raised only when the kernel refuses,
// and the call tried once more: on a newer kernel the limit the proxy
// inherits stays what it was. When nothing could be raised, the EPERM
// stands (it may as well mean missing CAP_BPF).
func withMemlock(call func() (int, error)) (int, error) {
	fd, err := call()
	if !errors.Is(err, unix.EPERM) || raiseMemlock() != nil {
		return fd, err
	}
	return call()
}

// progInfoOf reads a loaded program's ID and name.
func progInfoOf(fd int) (progInfo, error) {
	var info progInfo
	buf, err := marshalAttr(&info, nativeOrder)
	if err != nil {
		return info, err
	}
	var bufs buffers
	defer bufs.release()
	attr := objInfoAttr{BPFFD: uint32(fd), InfoLen: uint32(len(buf)), Info: bufs.ptr(buf)}
	if _, err := bpfCall(unix.BPF_OBJ_GET_INFO_BY_FD, &attr); err != nil {
		return info, fmt.Errorf("reading program info: %w", err)
	}
	err = unmarshalAttr(buf, &info)
	return info, err
}

// progFDByID opens a loaded program by its ID.
func progFDByID(id uint32) (int, error) {
	return bpfCall(unix.BPF_PROG_GET_FD_BY_ID, &getFDByIDAttr{ID: id})
}
