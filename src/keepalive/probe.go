package keepalive

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Probe checks what the kernel offers for the clamp: the bpf() system call
// with SOCK_OPS programs and bpf_setsockopt, a cgroup2 mount, and attaching
// a SOCK_OPS program to a cgroup (tried on a throwaway group that holds no
// process). It returns nil, or an error saying what is missing.
func Probe() error {
	return probe(mountinfoPath)
}

func probe(mountinfo string) error {
	if err := haveSockOps(); err != nil {
		return fmt.Errorf("BPF sock_ops programs: %w", explainBPF(err))
	}
	if err := haveHelper(bpfFuncSetsockopt); err != nil {
		return fmt.Errorf("bpf_setsockopt in sock_ops programs: %w", explainBPF(err))
	}
	mnt, err := cgroup2Mount(mountinfo)
	if err != nil {
		return err
	}
	prog, err := loadProgram(returnOne())
	if err != nil {
		return fmt.Errorf("loading a sock_ops program: %w", explainBPF(err))
	}
	defer unix.Close(prog)
	dir := filepath.Join(mnt, fmt.Sprintf("surflare-probe-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating a cgroup under %s: %w", mnt, err)
	}
	defer unix.Rmdir(dir)
	a, err := attachCgroup(dir, prog, unix.BPF_CGROUP_SOCK_OPS)
	if err != nil {
		return fmt.Errorf("attaching a sock_ops program to a cgroup: %w", explainBPF(err))
	}
	if err := a.close(); err != nil {
		return fmt.Errorf("detaching the probe program: %w", err)
	}
	return nil
}

// returnOne is the smallest SOCK_OPS program: return 1.
func returnOne() progSpec {
	return progSpec{
		progType:   unix.BPF_PROG_TYPE_SOCK_OPS,
		attachType: unix.BPF_CGROUP_SOCK_OPS,
		insns:      []insn{mov64Imm(r0, 1), exit()},
	}
}

// haveSockOps loads a program of the type: a kernel without it refuses
// before verifying (loadProgram says errNotSupported).
func haveSockOps() error {
	fd, err := loadProgram(returnOne())
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// haveHelper loads a SOCK_OPS program that calls the helper with its
// arguments unset. A kernel that has the helper for the type refuses the
// arguments (EACCES, "R1 !read_ok"); one that lacks it names the call
// itself in the verifier log ("invalid func", "unknown func", "program of
// this type cannot use helper"), as cilium/ebpf's features probe reads it.
func haveHelper(helper int32) error {
	spec := returnOne()
	spec.insns = append([]insn{call(helper)}, spec.insns...)
	fd, err := loadProgram(spec)
	if err == nil {
		return unix.Close(fd) // a verifier that lets unset arguments pass
	}
	var verr *verifierError
	if !errors.As(err, &verr) {
		return err
	}
	switch {
	case errors.Is(err, unix.EACCES):
		return nil
	case errors.Is(err, unix.EINVAL) && helperRefused(verr.log, helper):
		return fmt.Errorf("%w: %w", errNotSupported, err)
	}
	return err
}

// helperRefused reports whether a verifier log refuses the call of helper
// itself: "invalid func unknown#49" (no such helper), "program of this type
// cannot use helper bpf_setsockopt#49", or 4.9's "unknown func 49".
func helperRefused(log string, helper int32) bool {
	tag := "#" + strconv.Itoa(int(helper))
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "unknown func") ||
			hasTag(line, tag) && (strings.Contains(line, "invalid func") || strings.Contains(line, "cannot use helper")) {
			return true
		}
	}
	return false
}

// hasTag reports whether line holds tag ("#49") as a whole number, not as
// the start of another ("#490").
func hasTag(line, tag string) bool {
	for {
		i := strings.Index(line, tag)
		if i < 0 {
			return false
		}
		line = line[i+len(tag):]
		if line == "" || line[0] < '0' || line[0] > '9' {
			return true
		}
	}
}
