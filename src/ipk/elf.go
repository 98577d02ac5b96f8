package ipk

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"strings"
)

// elfTarget is what a binary for an OpenWrt architecture must look like.
type elfTarget struct {
	machine elf.Machine
	class   elf.Class
	order   binary.ByteOrder
}

// elfTargets maps the family prefix of an OpenWrt package architecture
// (x86_64, aarch64_cortex-a53, mipsel_24kc, ...) to its ELF identity. Longer
// prefixes come first so "mips64el" is not taken for "mips".
var elfTargets = []struct {
	prefix string
	elfTarget
}{
	{"x86_64", elfTarget{elf.EM_X86_64, elf.ELFCLASS64, binary.LittleEndian}},
	{"aarch64", elfTarget{elf.EM_AARCH64, elf.ELFCLASS64, binary.LittleEndian}},
	{"mips64el", elfTarget{elf.EM_MIPS, elf.ELFCLASS64, binary.LittleEndian}},
	{"mips64", elfTarget{elf.EM_MIPS, elf.ELFCLASS64, binary.BigEndian}},
	{"mipsel", elfTarget{elf.EM_MIPS, elf.ELFCLASS32, binary.LittleEndian}},
	{"mips", elfTarget{elf.EM_MIPS, elf.ELFCLASS32, binary.BigEndian}},
	{"arm", elfTarget{elf.EM_ARM, elf.ELFCLASS32, binary.LittleEndian}},
	{"i386", elfTarget{elf.EM_386, elf.ELFCLASS32, binary.LittleEndian}},
	{"riscv64", elfTarget{elf.EM_RISCV, elf.ELFCLASS64, binary.LittleEndian}},
}

func elfTargetFor(arch string) (elfTarget, bool) {
	for _, t := range elfTargets {
		if arch == t.prefix || strings.HasPrefix(arch, t.prefix+"_") {
			return t.elfTarget, true
		}
	}
	return elfTarget{}, false
}

// CheckStaticBinary verifies that data is an ELF executable for the OpenWrt
// architecture arch and is statically linked: no PT_INTERP (no dynamic
// loader, so no libc dependency) and no PT_DYNAMIC. A dynamically linked
// binary would install fine and then fail with "not found" on a router
// whose libc differs from the build machine's.
func CheckStaticBinary(data []byte, arch string) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not an ELF file: %w", err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("ELF type %v is not an executable", f.Type)
	}
	if want, ok := elfTargetFor(arch); ok {
		if f.Machine != want.machine || f.Class != want.class || f.ByteOrder != want.order {
			return fmt.Errorf("ELF is %v %v %v, but Architecture %s needs %v %v %v",
				f.Machine, f.Class, f.ByteOrder, arch, want.machine, want.class, want.order)
		}
	} else if arch != "all" {
		return fmt.Errorf("architecture %q: unknown ELF identity", arch)
	}
	for _, p := range f.Progs {
		switch p.Type {
		case elf.PT_INTERP:
			interp := make([]byte, p.Filesz)
			_, _ = p.ReadAt(interp, 0)
			return fmt.Errorf("dynamically linked: needs the loader %s (build with CGO_ENABLED=0)", strings.TrimRight(string(interp), "\x00"))
		case elf.PT_DYNAMIC:
			// A static-pie has PT_DYNAMIC for self-relocation but needs no library.
			if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
				return fmt.Errorf("dynamically linked: needs %s (build with CGO_ENABLED=0)", strings.Join(libs, ", "))
			}
		}
	}
	return nil
}
