package keepalive

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// Program names as the kernel shows them (bpftool prog, BPF_OBJ_GET_INFO);
// CleanupStale recognises our programs by them, so they never change.
// The kernel keeps at most 15 characters.
const (
	opsProgName = "surflare_ka_ops" // the SOCK_OPS program that sets the values
	capProgName = "surflare_ka_cap" // the cgroup setsockopt program that caps them
)

// Fields of the kernel's context structures (include/uapi/linux/bpf.h).
// They are ABI: offsets never move.
const (
	sockOpsOffOp = 0 // struct bpf_sock_ops.op (u32)

	sockoptOffOptval    = 8  // struct bpf_sockopt.optval (pointer)
	sockoptOffOptvalEnd = 16 // struct bpf_sockopt.optval_end (pointer)
	sockoptOffLevel     = 24 // struct bpf_sockopt.level (s32)
	sockoptOffOptname   = 28 // struct bpf_sockopt.optname (s32)

	// The sock_ops callbacks run once a TCP connection is established: the
	// first for connections the socket made, the second for accepted ones.
	opActiveEstablished  = 4 // BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB
	opPassiveEstablished = 5 // BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB
)

// Indexes of the per-CPU counters the sock_ops program keeps, so Status can
// say how many sockets were clamped and whether the kernel refused any.
const (
	counterClamped = 0 // every setsockopt call succeeded
	counterFailed  = 1 // at least one setsockopt call returned an error
	numCounters    = 2
)

// sockopt is one (level, name, value) the sock_ops program applies.
type sockopt struct {
	level, name int32
	value       int64
	what        string
}

// sockopts lists the options in the order they must be set: SO_KEEPALIVE
// first, as the kernel arms the timer with the idle time it has then.
func (cfg Config) sockopts() []sockopt {
	return []sockopt{
		{unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1, "SO_KEEPALIVE"},
		{unix.SOL_TCP, unix.TCP_KEEPIDLE, int64(cfg.Idle.Seconds()), "TCP_KEEPIDLE"},
		{unix.SOL_TCP, unix.TCP_KEEPINTVL, int64(cfg.Interval.Seconds()), "TCP_KEEPINTVL"},
		{unix.SOL_TCP, unix.TCP_KEEPCNT, int64(cfg.Count), "TCP_KEEPCNT"},
	}
}

// opsProgram builds the SOCK_OPS program. The configured values are
// immediates in the instructions: a new configuration means a new program,
// which is how the engine applies it anyway (Close, then New).
//
// In C it would read:
//
//	if (ops->op != ACTIVE_ESTABLISHED && ops->op != PASSIVE_ESTABLISHED) return 1;
//	err = setsockopt(SO_KEEPALIVE, 1) | setsockopt(TCP_KEEPIDLE, idle) | ...;
//	counters[err ? FAILED : CLAMPED]++;
//	return 1;
func opsProgram(cfg Config, counters *ebpf.Map) *ebpf.ProgramSpec {
	const (
		optvalOff = -4 // u32 option value on the stack
		keyOff    = -8 // u32 counter index on the stack
	)
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1), // r6 = ctx, kept across calls
		asm.LoadMem(asm.R2, asm.R6, sockOpsOffOp, asm.Word),
		asm.JEq.Imm(asm.R2, opActiveEstablished, "set"),
		asm.JNE.Imm(asm.R2, opPassiveEstablished, "out"),
		asm.Mov.Imm(asm.R7, 0).WithSymbol("set"), // r7 = OR of the return values
	}
	for _, o := range cfg.sockopts() {
		insns = append(insns,
			asm.StoreImm(asm.R10, optvalOff, o.value, asm.Word),
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Imm(asm.R2, o.level),
			asm.Mov.Imm(asm.R3, o.name),
			asm.Mov.Reg(asm.R4, asm.R10),
			asm.Add.Imm(asm.R4, optvalOff),
			asm.Mov.Imm(asm.R5, 4),
			asm.FnSetsockopt.Call(),
			asm.Or.Reg(asm.R7, asm.R0),
		)
	}
	insns = append(insns,
		asm.StoreImm(asm.R10, keyOff, counterClamped, asm.Word),
		asm.JEq.Imm(asm.R7, 0, "count"),
		asm.StoreImm(asm.R10, keyOff, counterFailed, asm.Word),
		asm.LoadMapPtr(asm.R1, counters.FD()).WithSymbol("count"),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, keyOff),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 1).WithSymbol("out"), // 1: let the operation proceed
		asm.Return(),
	)
	return &ebpf.ProgramSpec{
		Name:         opsProgName,
		Type:         ebpf.SockOps,
		AttachType:   ebpf.AttachCGroupSockOps,
		License:      "GPL", // bpf_setsockopt is GPL-only
		Instructions: insns,
	}
}

// capProgram builds the cgroup setsockopt program. An application in the
// cgroup that sets TCP_KEEPIDLE, TCP_KEEPINTVL or TCP_KEEPCNT itself after
// the connection is up (Go's net.Dialer does: 15 s idle, 15 s interval, 9
// probes) would otherwise undo the clamp; this caps what it asks for at the
// configured values. Smaller values and SO_KEEPALIVE are left alone: a
// keepalive that is more eager than ours serves the same purpose.
//
// In C it would read:
//
//	if (level == SOL_TCP && optname is KEEPIDLE/KEEPINTVL/KEEPCNT &&
//	    optval + 4 <= optval_end && *(s32 *)optval > max)
//		*(s32 *)optval = max;
//	return 1;
func capProgram(cfg Config) *ebpf.ProgramSpec {
	maxOf := map[int32]int64{}
	for _, o := range cfg.sockopts() {
		if o.level == unix.SOL_TCP {
			maxOf[o.name] = o.value
		}
	}
	return &ebpf.ProgramSpec{
		Name:       capProgName,
		Type:       ebpf.CGroupSockopt,
		AttachType: ebpf.AttachCGroupSetsockopt,
		License:    "GPL",
		Instructions: asm.Instructions{
			asm.LoadMem(asm.R2, asm.R1, sockoptOffLevel, asm.Word),
			asm.JNE.Imm(asm.R2, unix.SOL_TCP, "ok"),
			asm.LoadMem(asm.R3, asm.R1, sockoptOffOptname, asm.Word),
			asm.Mov.Imm(asm.R4, int32(maxOf[unix.TCP_KEEPIDLE])),
			asm.JEq.Imm(asm.R3, unix.TCP_KEEPIDLE, "cap"),
			asm.Mov.Imm(asm.R4, int32(maxOf[unix.TCP_KEEPINTVL])),
			asm.JEq.Imm(asm.R3, unix.TCP_KEEPINTVL, "cap"),
			asm.Mov.Imm(asm.R4, int32(maxOf[unix.TCP_KEEPCNT])),
			asm.JNE.Imm(asm.R3, unix.TCP_KEEPCNT, "ok"),
			asm.LoadMem(asm.R2, asm.R1, sockoptOffOptval, asm.DWord).WithSymbol("cap"),
			asm.LoadMem(asm.R3, asm.R1, sockoptOffOptvalEnd, asm.DWord),
			asm.Mov.Reg(asm.R5, asm.R2),
			asm.Add.Imm(asm.R5, 4),
			asm.JGT.Reg(asm.R5, asm.R3, "ok"), // the verifier insists on this bound
			asm.LoadMem(asm.R5, asm.R2, 0, asm.Word),
			// Signed 32-bit compare: zero and negative values stay as they
			// are, so the kernel still rejects them with EINVAL.
			asm.JSLE.Reg32(asm.R5, asm.R4, "ok"),
			asm.StoreMem(asm.R2, 0, asm.R4, asm.Word),
			asm.Mov.Imm(asm.R0, 1).WithSymbol("ok"), // 1: let the kernel apply it
			asm.Return(),
		},
	}
}

// countersSpec is the per-CPU array behind Status's socket counts.
func countersSpec() *ebpf.MapSpec {
	return &ebpf.MapSpec{
		Name:       "surflare_ka_cnt",
		Type:       ebpf.PerCPUArray,
		KeySize:    4,
		ValueSize:  8,
		MaxEntries: numCounters,
	}
}

// readCounters sums the per-CPU counters.
func readCounters(m *ebpf.Map) (clamped, failed uint64, err error) {
	sum := func(key uint32) (uint64, error) {
		var perCPU []uint64
		if err := m.Lookup(key, &perCPU); err != nil {
			return 0, fmt.Errorf("reading counter %d: %w", key, err)
		}
		var n uint64
		for _, v := range perCPU {
			n += v
		}
		return n, nil
	}
	if clamped, err = sum(counterClamped); err != nil {
		return 0, 0, err
	}
	failed, err = sum(counterFailed)
	return clamped, failed, err
}
