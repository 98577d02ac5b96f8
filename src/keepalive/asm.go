package keepalive

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// A small BPF assembler: just the instructions the clamp's programs and the
// probes use, each built by a function named after the kernel's own macro
// (include/linux/filter.h: BPF_MOV64_IMM, BPF_LDX_MEM, BPF_JMP_IMM, ...),
// with jump targets given as labels that assemble resolves to offsets.
// The opcodes are the kernel's (include/uapi/linux/bpf.h, bpf_common.h), as
// golang.org/x/sys/unix spells them.

// reg is one of the eleven BPF registers: r0 return value, r1-r5 arguments
// (clobbered by calls), r6-r9 kept across calls, r10 the read-only frame
// pointer.
type reg uint8

const (
	r0 reg = iota
	r1
	r2
	r3
	r4
	r5
	r6
	r7
	r8
	r9
	r10
)

// Helper function numbers (include/uapi/linux/bpf.h, __BPF_FUNC_MAPPER).
// They are ABI: a number never changes meaning.
const (
	bpfFuncMapLookupElem = 1  // void *bpf_map_lookup_elem(map, key)
	bpfFuncSetsockopt    = 49 // long bpf_setsockopt(ctx, level, optname, optval, optlen)
)

// insnSize is sizeof(struct bpf_insn); jump offsets count in these.
const insnSize = 8

// insn is one instruction before assembly. A 64-bit immediate load (ldMapFD)
// is one insn here and two struct bpf_insn slots in the program.
type insn struct {
	code     uint8
	dst, src reg
	off      int16
	imm      int32
	label    string // this instruction's name, a jump target
	target   string // for jumps: the label to jump to
}

// at names the instruction, so jumps can target it.
func (i insn) at(label string) insn {
	i.label = label
	return i
}

// wide reports whether the instruction takes two slots: BPF_LD | BPF_DW |
// BPF_IMM, the only 16-byte instruction.
func (i insn) wide() bool { return i.code == unix.BPF_LD|unix.BPF_DW|unix.BPF_IMM }

// mov64Imm: dst = imm.
func mov64Imm(dst reg, imm int32) insn {
	return insn{code: unix.BPF_ALU64 | unix.BPF_MOV | unix.BPF_K, dst: dst, imm: imm}
}

// mov64Reg: dst = src.
func mov64Reg(dst, src reg) insn {
	return insn{code: unix.BPF_ALU64 | unix.BPF_MOV | unix.BPF_X, dst: dst, src: src}
}

// alu64Imm: dst op= imm (op is BPF_ADD, BPF_OR, ...).
func alu64Imm(op uint8, dst reg, imm int32) insn {
	return insn{code: unix.BPF_ALU64 | op | unix.BPF_K, dst: dst, imm: imm}
}

// alu64Reg: dst op= src.
func alu64Reg(op uint8, dst, src reg) insn {
	return insn{code: unix.BPF_ALU64 | op | unix.BPF_X, dst: dst, src: src}
}

// ldxMem: dst = *(size *)(src + off); size is BPF_W, BPF_DW, ...
func ldxMem(size uint8, dst, src reg, off int16) insn {
	return insn{code: unix.BPF_LDX | size | unix.BPF_MEM, dst: dst, src: src, off: off}
}

// stMem: *(size *)(dst + off) = imm.
func stMem(size uint8, dst reg, off int16, imm int32) insn {
	return insn{code: unix.BPF_ST | size | unix.BPF_MEM, dst: dst, off: off, imm: imm}
}

// stxMem: *(size *)(dst + off) = src.
func stxMem(size uint8, dst, src reg, off int16) insn {
	return insn{code: unix.BPF_STX | size | unix.BPF_MEM, dst: dst, src: src, off: off}
}

// atomicAdd: lock *(size *)(dst + off) += src (BPF_ATOMIC with imm BPF_ADD,
// the old BPF_XADD: the same encoding since kernel 4.0).
func atomicAdd(size uint8, dst, src reg, off int16) insn {
	return insn{code: unix.BPF_STX | size | unix.BPF_ATOMIC, dst: dst, src: src, off: off, imm: unix.BPF_ADD}
}

// jmpImm: if dst op imm goto target (64-bit compare; op is BPF_JEQ, ...).
func jmpImm(op uint8, dst reg, imm int32, target string) insn {
	return insn{code: unix.BPF_JMP | op | unix.BPF_K, dst: dst, imm: imm, target: target}
}

// jmpReg: if dst op src goto target (64-bit compare).
func jmpReg(op uint8, dst, src reg, target string) insn {
	return insn{code: unix.BPF_JMP | op | unix.BPF_X, dst: dst, src: src, target: target}
}

// jmp32Reg: if (u32/s32)dst op (u32/s32)src goto target (kernel 5.1).
func jmp32Reg(op uint8, dst, src reg, target string) insn {
	return insn{code: unix.BPF_JMP32 | op | unix.BPF_X, dst: dst, src: src, target: target}
}

// ldMapFD: dst = the map behind fd. A 64-bit immediate load whose source
// register BPF_PSEUDO_MAP_FD tells the verifier to replace the fd with the
// map's address.
func ldMapFD(dst reg, fd int) insn {
	return insn{code: unix.BPF_LD | unix.BPF_DW | unix.BPF_IMM, dst: dst, src: unix.BPF_PSEUDO_MAP_FD, imm: int32(fd)}
}

// call: r0 = helper(r1, ..., r5).
func call(helper int32) insn {
	return insn{code: unix.BPF_JMP | unix.BPF_CALL, imm: helper}
}

// exit: return r0.
func exit() insn {
	return insn{code: unix.BPF_JMP | unix.BPF_EXIT}
}

// assemble resolves the labels and encodes the program as struct bpf_insn
// in the given byte order (the kernel takes the CPU's own).
func assemble(prog []insn, order binary.ByteOrder) ([]byte, error) {
	slotOf := make(map[string]int, 4)
	slot := 0
	for _, in := range prog {
		if in.label != "" {
			if _, dup := slotOf[in.label]; dup {
				return nil, fmt.Errorf("assembling: label %q defined twice", in.label)
			}
			slotOf[in.label] = slot
		}
		slot++
		if in.wide() {
			slot++
		}
	}
	out := make([]byte, 0, slot*insnSize)
	slot = 0
	for _, in := range prog {
		if in.target != "" {
			to, ok := slotOf[in.target]
			if !ok {
				return nil, fmt.Errorf("assembling: jump to undefined label %q", in.target)
			}
			// The offset counts from the instruction after the jump.
			off := to - slot - 1
			if off != int(int16(off)) {
				return nil, fmt.Errorf("assembling: jump to %q is out of range (%d)", in.target, off)
			}
			in.off = int16(off)
		}
		if in.dst > r10 || in.src > 0xf {
			return nil, fmt.Errorf("assembling: register out of range in instruction %d", slot)
		}
		out = appendInsn(out, order, in.code, in.dst, in.src, in.off, in.imm)
		slot++
		if in.wide() {
			// The second half holds the upper 32 bits of the immediate,
			// zero for a map fd, and nothing else.
			out = appendInsn(out, order, 0, 0, 0, 0, 0)
			slot++
		}
	}
	return out, nil
}

// appendInsn encodes one struct bpf_insn { u8 code; u8 dst_reg:4, src_reg:4;
// s16 off; s32 imm; }. The C bitfields are laid out from the least
// significant bit on little-endian CPUs and from the most significant one
// on big-endian CPUs, so the register byte's nibbles swap with the order.
func appendInsn(b []byte, order binary.ByteOrder, code uint8, dst, src reg, off int16, imm int32) []byte {
	regs := uint8(src)<<4 | uint8(dst)
	if bigEndian(order) {
		regs = uint8(dst)<<4 | uint8(src)
	}
	var raw [insnSize]byte
	raw[0], raw[1] = code, regs
	order.PutUint16(raw[2:], uint16(off))
	order.PutUint32(raw[4:], uint32(imm))
	return append(b, raw[:]...)
}

// bigEndian reports whether order writes the most significant byte first
// (binary.NativeEndian is its own type, so it cannot be compared).
func bigEndian(order binary.ByteOrder) bool {
	var b [2]byte
	order.PutUint16(b[:], 1)
	return b[0] == 0
}
