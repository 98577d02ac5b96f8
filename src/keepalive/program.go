package keepalive

import (
	"fmt"

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
func opsProgram(cfg Config, countersFD int) progSpec {
	const (
		optvalOff = -4 // u32 option value on the stack
		keyOff    = -8 // u32 counter index on the stack
	)
	insns := []insn{
		mov64Reg(r6, r1), // r6 = ctx, kept across calls
		ldxMem(unix.BPF_W, r2, r6, sockOpsOffOp),
		jmpImm(unix.BPF_JEQ, r2, opActiveEstablished, "set"),
		jmpImm(unix.BPF_JNE, r2, opPassiveEstablished, "out"),
		mov64Imm(r7, 0).at("set"), // r7 = OR of the return values
	}
	for _, o := range cfg.sockopts() {
		insns = append(insns,
			stMem(unix.BPF_W, r10, optvalOff, int32(o.value)),
			mov64Reg(r1, r6),
			mov64Imm(r2, o.level),
			mov64Imm(r3, o.name),
			mov64Reg(r4, r10),
			alu64Imm(unix.BPF_ADD, r4, optvalOff),
			mov64Imm(r5, 4),
			call(bpfFuncSetsockopt),
			alu64Reg(unix.BPF_OR, r7, r0),
		)
	}
	insns = append(insns,
		stMem(unix.BPF_W, r10, keyOff, counterClamped),
		jmpImm(unix.BPF_JEQ, r7, 0, "count"),
		stMem(unix.BPF_W, r10, keyOff, counterFailed),
		ldMapFD(r1, countersFD).at("count"),
		mov64Reg(r2, r10),
		alu64Imm(unix.BPF_ADD, r2, keyOff),
		call(bpfFuncMapLookupElem),
		jmpImm(unix.BPF_JEQ, r0, 0, "out"),
		mov64Imm(r1, 1),
		atomicAdd(unix.BPF_DW, r0, r1, 0),
		mov64Imm(r0, 1).at("out"), // 1: let the operation proceed
		exit(),
	)
	return progSpec{
		name:       opsProgName,
		progType:   unix.BPF_PROG_TYPE_SOCK_OPS,
		attachType: unix.BPF_CGROUP_SOCK_OPS,
		insns:      insns,
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
func capProgram(cfg Config) progSpec {
	maxOf := map[int32]int64{}
	for _, o := range cfg.sockopts() {
		if o.level == unix.SOL_TCP {
			maxOf[o.name] = o.value
		}
	}
	return progSpec{
		name:       capProgName,
		progType:   unix.BPF_PROG_TYPE_CGROUP_SOCKOPT,
		attachType: unix.BPF_CGROUP_SETSOCKOPT,
		insns: []insn{
			ldxMem(unix.BPF_W, r2, r1, sockoptOffLevel),
			jmpImm(unix.BPF_JNE, r2, unix.SOL_TCP, "ok"),
			ldxMem(unix.BPF_W, r3, r1, sockoptOffOptname),
			mov64Imm(r4, int32(maxOf[unix.TCP_KEEPIDLE])),
			jmpImm(unix.BPF_JEQ, r3, unix.TCP_KEEPIDLE, "cap"),
			mov64Imm(r4, int32(maxOf[unix.TCP_KEEPINTVL])),
			jmpImm(unix.BPF_JEQ, r3, unix.TCP_KEEPINTVL, "cap"),
			mov64Imm(r4, int32(maxOf[unix.TCP_KEEPCNT])),
			jmpImm(unix.BPF_JNE, r3, unix.TCP_KEEPCNT, "ok"),
			ldxMem(unix.BPF_DW, r2, r1, sockoptOffOptval).at("cap"),
			ldxMem(unix.BPF_DW, r3, r1, sockoptOffOptvalEnd),
			mov64Reg(r5, r2),
			alu64Imm(unix.BPF_ADD, r5, 4),
			jmpReg(unix.BPF_JGT, r5, r3, "ok"), // the verifier insists on this bound
			ldxMem(unix.BPF_W, r5, r2, 0),
			// Signed 32-bit compare: zero and negative values stay as they
			// are, so the kernel still rejects them with EINVAL.
			jmp32Reg(unix.BPF_JSLE, r5, r4, "ok"),
			stxMem(unix.BPF_W, r2, r4, 0),
			mov64Imm(r0, 1).at("ok"), // 1: let the kernel apply it
			exit(),
		},
	}
}

// countersMapName is the per-CPU array behind Status's socket counts, as
// bpftool map shows it.
const countersMapName = "surflare_ka_cnt"

// createCounters makes the per-CPU array of numCounters u64 counters.
func createCounters() (int, error) {
	return createMap(unix.BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, numCounters, countersMapName)
}

// readCounters sums the per-CPU counters.
func readCounters(countersFD int) (clamped, failed uint64, err error) {
	sum := func(key uint32) (uint64, error) {
		perCPU, err := lookupPerCPU(countersFD, key)
		if err != nil {
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
