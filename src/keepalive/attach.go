package keepalive

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// attachment is one program attached to a cgroup: through a bpf_link
// (kernel 5.7), which the kernel detaches when its last fd closes, also
// when the watchdog crashes; or, on older kernels, with BPF_PROG_ATTACH,
// which stays until detached (CleanupStale's job after a crash).
type attachment struct {
	link       int // the bpf_link's fd; -1 when attached the legacy way
	cgroup     int // legacy: the cgroup's fd, to detach from; else -1
	prog       int // legacy: a duplicate of the program's fd; else -1
	attachType uint32
}

// openCgroup opens a cgroup directory as the target of attach commands.
func openCgroup(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening cgroup %s: %w", path, err)
	}
	return fd, nil
}

// attachCgroup attaches a loaded program to the cgroup at path, as
// cilium/ebpf's link.AttachCgroup does: through a bpf_link where the
// kernel has them, else with BPF_PROG_ATTACH and BPF_F_ALLOW_MULTI (4.15),
// so other programs of the same type on the group keep running.
func attachCgroup(path string, progFD int, attachType uint32) (*attachment, error) {
	cg, err := openCgroup(path)
	if err != nil {
		return nil, err
	}
	lfd, err := bpfCall(unix.BPF_LINK_CREATE, &linkCreateAttr{
		ProgFD: uint32(progFD), TargetFD: uint32(cg), AttachType: attachType})
	if err == nil {
		unix.Close(cg)
		return &attachment{link: lfd, cgroup: -1, prog: -1, attachType: attachType}, nil
	}
	if !errors.Is(err, unix.EINVAL) || haveBPFLink() {
		unix.Close(cg)
		return nil, fmt.Errorf("creating bpf_link: %w", attachError(err))
	}
	return progAttachCgroup(cg, progFD, attachType)
}

// progAttachCgroup attaches with BPF_PROG_ATTACH, the way before bpf_link.
// It takes over the cgroup fd, and keeps a program fd of its own, so
// detaching works whatever the caller closes first.
func progAttachCgroup(cg, progFD int, attachType uint32) (*attachment, error) {
	prog, err := unix.FcntlInt(uintptr(progFD), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		unix.Close(cg)
		return nil, fmt.Errorf("duplicating program fd: %w", err)
	}
	_, err = bpfCall(unix.BPF_PROG_ATTACH, &progAttachAttr{
		TargetFD: uint32(cg), AttachBPFFD: uint32(prog), AttachType: attachType, AttachFlags: unix.BPF_F_ALLOW_MULTI})
	if err != nil {
		unix.Close(prog)
		unix.Close(cg)
		return nil, fmt.Errorf("attaching program: %w", attachError(err))
	}
	return &attachment{link: -1, cgroup: cg, prog: prog, attachType: attachType}, nil
}

// attachError marks the errors of an attach type the kernel lacks: EINVAL
// (an attach type it does not know, or cgroup BPF compiled out) and
// ENOTSUPP.
func attachError(err error) error {
	if errors.Is(err, unix.EINVAL) || errors.Is(err, errnoENOTSUPP) {
		return fmt.Errorf("%w: %w", errNotSupported, err)
	}
	return err
}

// haveBPFLink tells a kernel without BPF_LINK_CREATE (before 5.7: EINVAL,
// an unknown command) from one that refused the arguments: with invalid
// fds a kernel that has the command says EBADF.
var haveBPFLink = sync.OnceValue(func() bool {
	_, err := bpfCall(unix.BPF_LINK_CREATE, &linkCreateAttr{
		ProgFD: ^uint32(0), TargetFD: ^uint32(0), AttachType: unix.BPF_CGROUP_INET_INGRESS})
	return !errors.Is(err, unix.EINVAL)
})

// close detaches the program. Safe to call twice.
func (a *attachment) close() error {
	if a.link >= 0 {
		err := unix.Close(a.link)
		a.link = -1
		return err
	}
	if a.cgroup < 0 {
		return nil
	}
	err := detachProgram(a.cgroup, a.prog, a.attachType)
	unix.Close(a.prog)
	unix.Close(a.cgroup)
	a.cgroup, a.prog = -1, -1
	return err
}

// detachProgram detaches a program attached with BPF_PROG_ATTACH. ENOENT:
// it is not attached there that way (it may be attached through a link,
// which only the link's owner can detach).
func detachProgram(cgroupFD, progFD int, attachType uint32) error {
	_, err := bpfCall(unix.BPF_PROG_DETACH, &progAttachAttr{
		TargetFD: uint32(cgroupFD), AttachBPFFD: uint32(progFD), AttachType: attachType})
	return err
}

// attachedProg is a program attached to a cgroup, as BPF_PROG_QUERY
// lists it.
type attachedProg struct {
	id     uint32
	linkID uint32 // the link it is attached through; 0 when unknown or none
}

// queryCgroup lists the programs attached directly to a cgroup (not those
// it inherits) for one attach type. Kernels whose attach point reports a
// revision (bpf_mprog, 6.6) also say which link each program came through,
// as cilium/ebpf's link.QueryPrograms reads them; elsewhere linkID is 0.
func queryCgroup(cgroupFD int, attachType uint32) ([]attachedProg, error) {
	for tries := 0; ; tries++ {
		count := progQueryAttr{TargetFD: uint32(cgroupFD), AttachType: attachType}
		if _, err := bpfCall(unix.BPF_PROG_QUERY, &count); err != nil {
			return nil, err
		}
		if count.ProgCnt == 0 {
			return nil, nil
		}
		n := count.ProgCnt
		ids := make([]uint32, n)
		var links []uint32
		var bufs buffers
		attr := progQueryAttr{TargetFD: uint32(cgroupFD), AttachType: attachType,
			ProgIDs: bufs.ptr32(ids), ProgCnt: n}
		if count.Revision != 0 {
			links = make([]uint32, n)
			attr.LinkIDs = bufs.ptr32(links)
		}
		_, err := bpfCall(unix.BPF_PROG_QUERY, &attr)
		bufs.release()
		if errors.Is(err, unix.ENOSPC) && tries < 3 {
			continue // more were attached between the two calls
		}
		if err != nil {
			return nil, err
		}
		out := make([]attachedProg, min(attr.ProgCnt, n))
		for i := range out {
			out[i].id = ids[i]
			if links != nil {
				out[i].linkID = links[i]
			}
		}
		return out, nil
	}
}
