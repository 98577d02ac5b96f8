package keepalive

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Encodings as the kernel documents them (Documentation/bpf/standardization/
// instruction-set.rst: opcode byte, then dst_reg in the low nibble on
// little-endian CPUs, src_reg in the low nibble on big-endian ones, then
// offset and immediate in the CPU's order) and as `bpftool prog dump xlated
// opcodes` prints them on x86_64.
func TestInstructionEncodings(t *testing.T) {
	hex := func(s string) []byte {
		t.Helper()
		var b []byte
		for _, f := range strings.Fields(s) {
			var v byte
			for _, c := range f {
				v = v<<4 | byte(strings.IndexRune("0123456789abcdef", c))
			}
			b = append(b, v)
		}
		return b
	}
	for _, tc := range []struct {
		name   string
		prog   []insn
		le, be string
	}{
		{"r0 = 1; exit", []insn{mov64Imm(r0, 1), exit()},
			"b7 00 00 00 01 00 00 00  95 00 00 00 00 00 00 00",
			"b7 00 00 00 00 00 00 01  95 00 00 00 00 00 00 00"},
		{"r2 = map fd 7 (ld_imm64, BPF_PSEUDO_MAP_FD)", []insn{ldMapFD(r2, 7)},
			"18 12 00 00 07 00 00 00  00 00 00 00 00 00 00 00",
			"18 21 00 00 00 00 00 07  00 00 00 00 00 00 00 00"},
		{"*(u32 *)(r10 - 4) = 30", []insn{stMem(unix.BPF_W, r10, -4, 30)},
			"62 0a fc ff 1e 00 00 00", "62 a0 ff fc 00 00 00 1e"},
		{"r2 = *(u32 *)(r6 + 0)", []insn{ldxMem(unix.BPF_W, r2, r6, 0)},
			"61 62 00 00 00 00 00 00", "61 26 00 00 00 00 00 00"},
		{"r2 = *(u64 *)(r1 + 8)", []insn{ldxMem(unix.BPF_DW, r2, r1, 8)},
			"79 12 08 00 00 00 00 00", "79 21 00 08 00 00 00 00"},
		{"*(u32 *)(r2 + 0) = r4", []insn{stxMem(unix.BPF_W, r2, r4, 0)},
			"63 42 00 00 00 00 00 00", "63 24 00 00 00 00 00 00"},
		{"lock *(u64 *)(r0 + 0) += r1", []insn{atomicAdd(unix.BPF_DW, r0, r1, 0)},
			"db 10 00 00 00 00 00 00", "db 01 00 00 00 00 00 00"},
		{"r6 = r1", []insn{mov64Reg(r6, r1)}, "bf 16 00 00 00 00 00 00", "bf 61 00 00 00 00 00 00"},
		{"r4 += -4", []insn{alu64Imm(unix.BPF_ADD, r4, -4)}, "07 04 00 00 fc ff ff ff", "07 40 00 00 ff ff ff fc"},
		{"r7 |= r0", []insn{alu64Reg(unix.BPF_OR, r7, r0)}, "4f 07 00 00 00 00 00 00", "4f 70 00 00 00 00 00 00"},
		{"call bpf_setsockopt (49)", []insn{call(bpfFuncSetsockopt)},
			"85 00 00 00 31 00 00 00", "85 00 00 00 00 00 00 31"},
	} {
		for _, o := range []struct {
			order binary.ByteOrder
			want  string
		}{{binary.LittleEndian, tc.le}, {binary.BigEndian, tc.be}} {
			got, err := assemble(tc.prog, o.order)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if want := hex(o.want); !bytes.Equal(got, want) {
				t.Errorf("%s, %v:\n got % x\nwant % x", tc.name, o.order, got, want)
			}
		}
	}
}

// Jump offsets count struct bpf_insn slots from the instruction after the
// jump; a 64-bit immediate load in between counts twice.
func TestJumpOffsets(t *testing.T) {
	prog := []insn{
		jmpImm(unix.BPF_JEQ, r1, 0, "end"),     // slot 0: over 1, 2-3, 4 to 5: +4
		mov64Imm(r0, 2).at("back"),             // slot 1
		ldMapFD(r1, 3),                         // slots 2-3
		jmp32Reg(unix.BPF_JSLE, r5, r4, "end"), // slot 4: +0
		mov64Imm(r0, 1).at("end"),              // slot 5
		jmpReg(unix.BPF_JGT, r5, r3, "back"),   // slot 6: back to 1: -6
		exit(),
	}
	code, err := assemble(prog, binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	if len(code) != 8*insnSize {
		t.Fatalf("program is %d bytes, want 8 slots", len(code))
	}
	for _, c := range []struct {
		slot int
		code byte
		off  int16
	}{{0, 0x15, 4}, {4, 0xde, 0}, {6, 0x2d, -6}} {
		raw := code[c.slot*insnSize:]
		if raw[0] != c.code || int16(binary.LittleEndian.Uint16(raw[2:])) != c.off {
			t.Errorf("slot %d: opcode %#x offset %d, want %#x %d", c.slot, raw[0], int16(binary.LittleEndian.Uint16(raw[2:])), c.code, c.off)
		}
	}

	for _, bad := range []struct {
		prog []insn
		want string
	}{
		{[]insn{jmpImm(unix.BPF_JEQ, r1, 0, "nowhere"), exit()}, `undefined label "nowhere"`},
		{[]insn{exit().at("x"), exit().at("x")}, `label "x" defined twice`},
	} {
		if _, err := assemble(bad.prog, binary.LittleEndian); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("assemble = %v, want an error saying %s", err, bad.want)
		}
	}
}

// The clamp's programs are what the C in their comments says: the opcodes
// and jumps that matter, checked in the encoding the kernel gets.
func TestProgramsShape(t *testing.T) {
	ops, err := assemble(opsProgram(testCfg, 9).insns, binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := assemble(capProgram(testCfg).insns, binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	count := func(code []byte, op byte, imm int32) (n int) {
		for i := 0; i < len(code); i += insnSize {
			if code[i] == op && int32(binary.LittleEndian.Uint32(code[i+4:])) == imm {
				n++
			}
		}
		return n
	}
	const call, stW, movK = 0x85, 0x62, 0xb7
	if n := count(ops, call, bpfFuncSetsockopt); n != 4 {
		t.Errorf("sock_ops program calls bpf_setsockopt %d times, want 4 (SO_KEEPALIVE, IDLE, INTVL, CNT)", n)
	}
	for _, v := range []int32{1, 37, 11, 4} {
		if count(ops, stW, v) == 0 {
			t.Errorf("sock_ops program never stores the value %d", v)
		}
	}
	if i := bytes.Index(ops, []byte{0x18, 0x11, 0, 0, 9, 0, 0, 0}); i < 0 || i%insnSize != 0 {
		t.Errorf("sock_ops program does not load the counters map (fd 9) into r1")
	}
	for _, v := range []int32{37, 11, 4} {
		if count(cp, movK, v) != 1 {
			t.Errorf("cap program does not load the cap %d once", v)
		}
	}
	if last := ops[len(ops)-insnSize]; last != 0x95 || cp[len(cp)-insnSize] != 0x95 {
		t.Errorf("programs do not end in exit")
	}
}
