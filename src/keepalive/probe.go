package keepalive

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
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
	_ = rlimit.RemoveMemlock()
	if err := features.HaveProgramType(ebpf.SockOps); err != nil {
		return fmt.Errorf("BPF sock_ops programs: %w", explainBPF(err))
	}
	if err := features.HaveProgramHelper(ebpf.SockOps, asm.FnSetsockopt); err != nil {
		return fmt.Errorf("bpf_setsockopt in sock_ops programs: %w", explainBPF(err))
	}
	mnt, err := cgroup2Mount(mountinfo)
	if err != nil {
		return err
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.SockOps,
		AttachType:   ebpf.AttachCGroupSockOps,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()},
	})
	if err != nil {
		return fmt.Errorf("loading a sock_ops program: %w", explainBPF(err))
	}
	defer prog.Close()
	dir := filepath.Join(mnt, fmt.Sprintf("surflare-probe-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating a cgroup under %s: %w", mnt, err)
	}
	defer unix.Rmdir(dir)
	l, err := link.AttachCgroup(link.CgroupOptions{Path: dir, Attach: ebpf.AttachCGroupSockOps, Program: prog})
	if err != nil {
		return fmt.Errorf("attaching a sock_ops program to a cgroup: %w", explainBPF(err))
	}
	if err := l.Close(); err != nil {
		return fmt.Errorf("detaching the probe program: %w", err)
	}
	return nil
}
