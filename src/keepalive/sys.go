package keepalive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The bpf(2) system call and the parts of union bpf_attr the clamp uses
// (include/uapi/linux/bpf.h). Each command's struct is a Go struct of
// fixed-size fields in the header's order, with the padding the C compiler
// adds spelled out as blank fields, marshalled with encoding/binary in the
// CPU's byte order: the layout is the same on 32- and 64-bit CPUs (Go
// itself aligns a uint64 to 4 bytes on arm and mips), and pointers travel
// as the header's __aligned_u64.
//
// The kernel accepts a shorter attr than it knows (it zero-fills the rest)
// and rejects a longer one only if the extra bytes are not zero, so each
// struct ends at the last field used and works on every kernel that has
// the command.

// errnoENOTSUPP is the kernel's internal ENOTSUPP (524), which bpf() lets
// out: a JIT that cannot compile a program while the interpreter is
// compiled out (CONFIG_BPF_JIT_ALWAYS_ON), or an operation a program or
// attach type does not support.
const errnoENOTSUPP = syscall.Errno(524)

// errNotSupported is wrapped by errors that mean the kernel lacks a program
// type, map type or attach type (too old, or built without it).
var errNotSupported = errors.New("not supported by the kernel")

// nativeOrder is the byte order the kernel expects in attrs and
// instructions: the CPU's own.
var nativeOrder binary.ByteOrder = binary.NativeEndian

// mapCreateAttr is BPF_MAP_CREATE's attr, up to map_name (kernel 4.15).
type mapCreateAttr struct {
	MapType    uint32
	KeySize    uint32
	ValueSize  uint32
	MaxEntries uint32
	MapFlags   uint32
	InnerMapFD uint32
	NumaNode   uint32
	MapName    [unix.BPF_OBJ_NAME_LEN]byte
}

// mapElemAttr is BPF_MAP_*_ELEM's attr.
type mapElemAttr struct {
	MapFD uint32
	_     uint32
	Key   uint64 // pointer
	Value uint64 // pointer
	Flags uint64
}

// progLoadAttr is BPF_PROG_LOAD's attr, up to expected_attach_type (4.17).
type progLoadAttr struct {
	ProgType           uint32
	InsnCnt            uint32
	Insns              uint64 // pointer to struct bpf_insn[InsnCnt]
	License            uint64 // pointer to a NUL-terminated string
	LogLevel           uint32
	LogSize            uint32
	LogBuf             uint64 // pointer
	KernVersion        uint32
	ProgFlags          uint32
	ProgName           [unix.BPF_OBJ_NAME_LEN]byte
	ProgIfindex        uint32
	ExpectedAttachType uint32
}

// progAttachAttr is BPF_PROG_ATTACH's and BPF_PROG_DETACH's attr, up to
// replace_bpf_fd (5.5).
type progAttachAttr struct {
	TargetFD     uint32
	AttachBPFFD  uint32
	AttachType   uint32
	AttachFlags  uint32
	ReplaceBPFFD uint32
}

// linkCreateAttr is BPF_LINK_CREATE's attr (5.7), without the per-type
// union that follows.
type linkCreateAttr struct {
	ProgFD     uint32
	TargetFD   uint32
	AttachType uint32
	Flags      uint32
}

// progQueryAttr is BPF_PROG_QUERY's attr, up to revision (6.6: the kernels
// whose attach points have bpf_mprog fill link_ids and a revision >= 1).
type progQueryAttr struct {
	TargetFD        uint32
	AttachType      uint32
	QueryFlags      uint32
	AttachFlags     uint32 // out
	ProgIDs         uint64 // pointer to u32[ProgCnt]
	ProgCnt         uint32 // in: room in ProgIDs; out: programs attached
	_               uint32
	ProgAttachFlags uint64 // pointer
	LinkIDs         uint64 // pointer to u32[ProgCnt]
	LinkAttachFlags uint64 // pointer
	Revision        uint64 // out
}

// getFDByIDAttr is BPF_PROG_GET_FD_BY_ID's attr.
type getFDByIDAttr struct {
	ID        uint32
	NextID    uint32
	OpenFlags uint32
}

// objInfoAttr is BPF_OBJ_GET_INFO_BY_FD's attr.
type objInfoAttr struct {
	BPFFD   uint32
	InfoLen uint32 // in: room in Info; out: bytes written
	Info    uint64 // pointer
}

// progInfo is struct bpf_prog_info up to name (4.15).
type progInfo struct {
	Type            uint32
	ID              uint32
	Tag             [8]byte
	JitedProgLen    uint32
	XlatedProgLen   uint32
	JitedProgInsns  uint64
	XlatedProgInsns uint64
	LoadTime        uint64
	CreatedByUID    uint32
	NrMapIDs        uint32
	MapIDs          uint64
	Name            [unix.BPF_OBJ_NAME_LEN]byte
}

// buffers keeps the memory an attr points to where it is, and alive, until
// the system call is over: the kernel reads it through addresses that the
// garbage collector does not see as pointers. (A buffer handed to Pin
// escapes, so it lives on the heap, not on a stack that may move.)
type buffers struct{ pin runtime.Pinner }

// ptr returns b's address for a pointer field; nil or empty b is 0.
func (p *buffers) ptr(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	p.pin.Pin(&b[0])
	return uint64(uintptr(unsafe.Pointer(&b[0])))
}

// ptr32 is ptr for a u32 array.
func (p *buffers) ptr32(u []uint32) uint64 {
	if len(u) == 0 {
		return 0
	}
	p.pin.Pin(&u[0])
	return uint64(uintptr(unsafe.Pointer(&u[0])))
}

func (p *buffers) release() { p.pin.Unpin() }

// marshalAttr encodes attr (a pointer to one of the structs above) as the
// kernel reads it.
func marshalAttr(attr any, order binary.ByteOrder) ([]byte, error) {
	b := make([]byte, binary.Size(attr))
	if _, err := binary.Encode(b, order, attr); err != nil {
		return nil, fmt.Errorf("marshalling bpf attr %T: %w", attr, err)
	}
	return b, nil
}

// bpfCall runs one bpf(2) command. attr points to the command's struct;
// what the kernel writes back into it (counts, lengths) is decoded into it
// again. The result is the new file descriptor for commands that make one.
// The error is the bare errno, which callers wrap with what they did.
func bpfCall(cmd int, attr any) (int, error) {
	buf, err := marshalAttr(attr, nativeOrder)
	if err != nil {
		return -1, err
	}
	for {
		r, _, errno := unix.Syscall(unix.SYS_BPF, uintptr(cmd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		// Since 4.20 the verifier gives up with EAGAIN when a signal
		// arrives (the Go runtime's preemption signals do); it is safe to
		// load again.
		if errno == unix.EAGAIN && cmd == unix.BPF_PROG_LOAD {
			continue
		}
		if _, err := binary.Decode(buf, nativeOrder, attr); err != nil {
			return -1, fmt.Errorf("unmarshalling bpf attr %T: %w", attr, err)
		}
		if errno != 0 {
			return -1, errno
		}
		return int(r), nil
	}
}

// objName is a kernel object name: at most 15 characters and a NUL (longer
// names are cut, as the kernel would show them).
func objName(s string) (n [unix.BPF_OBJ_NAME_LEN]byte) {
	copy(n[:len(n)-1], s)
	return n
}

// cString is the part of b before its first NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// closeFD closes a file descriptor bpf() returned; -1 is a no-op.
func closeFD(fd int) error {
	if fd < 0 {
		return nil
	}
	return unix.Close(fd)
}

// unmarshalAttr decodes what the kernel wrote into b (an info struct).
func unmarshalAttr(b []byte, attr any) error {
	if _, err := binary.Decode(b, nativeOrder, attr); err != nil {
		return fmt.Errorf("unmarshalling bpf attr %T: %w", attr, err)
	}
	return nil
}
