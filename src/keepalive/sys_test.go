package keepalive

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

// The attrs' field offsets, from include/uapi/linux/bpf.h (checked with
// offsetof against the 6.1 header; link_ids, link_attach_flags and
// revision from 6.6's). Every field of each struct is set to a distinct
// value and found at its offset, in both byte orders: encoding/binary does
// not depend on the CPU, so this holds for the 32-bit builds too.
func TestAttrLayouts(t *testing.T) {
	for _, tc := range []struct {
		attr    any
		size    int
		offsets map[string]int
	}{
		{&mapCreateAttr{}, 44, map[string]int{"MapType": 0, "KeySize": 4, "ValueSize": 8, "MaxEntries": 12,
			"MapFlags": 16, "InnerMapFD": 20, "NumaNode": 24, "MapName": 28}},
		{&mapElemAttr{}, 32, map[string]int{"MapFD": 0, "Key": 8, "Value": 16, "Flags": 24}},
		{&progLoadAttr{}, 72, map[string]int{"ProgType": 0, "InsnCnt": 4, "Insns": 8, "License": 16,
			"LogLevel": 24, "LogSize": 28, "LogBuf": 32, "KernVersion": 40, "ProgFlags": 44,
			"ProgName": 48, "ProgIfindex": 64, "ExpectedAttachType": 68}},
		{&progAttachAttr{}, 20, map[string]int{"TargetFD": 0, "AttachBPFFD": 4, "AttachType": 8,
			"AttachFlags": 12, "ReplaceBPFFD": 16}},
		{&linkCreateAttr{}, 16, map[string]int{"ProgFD": 0, "TargetFD": 4, "AttachType": 8, "Flags": 12}},
		{&progQueryAttr{}, 64, map[string]int{"TargetFD": 0, "AttachType": 4, "QueryFlags": 8,
			"AttachFlags": 12, "ProgIDs": 16, "ProgCnt": 24, "ProgAttachFlags": 32, "LinkIDs": 40,
			"LinkAttachFlags": 48, "Revision": 56}},
		{&getFDByIDAttr{}, 12, map[string]int{"ID": 0, "NextID": 4, "OpenFlags": 8}},
		{&objInfoAttr{}, 16, map[string]int{"BPFFD": 0, "InfoLen": 4, "Info": 8}},
		{&progInfo{}, 80, map[string]int{"Type": 0, "ID": 4, "Tag": 8, "JitedProgLen": 16,
			"XlatedProgLen": 20, "JitedProgInsns": 24, "XlatedProgInsns": 32, "LoadTime": 40,
			"CreatedByUID": 48, "NrMapIDs": 52, "MapIDs": 56, "Name": 64}},
	} {
		v := reflect.ValueOf(tc.attr).Elem()
		name := v.Type().Name()
		// Distinct values whose bytes all differ, so a misplaced or
		// mis-sized field shows.
		seen := 0
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if v.Type().Field(i).Name == "_" {
				continue
			}
			seen++
			switch f.Kind() {
			case reflect.Uint32:
				f.SetUint(0xa1b2c300 + uint64(i))
			case reflect.Uint64:
				f.SetUint(0x0102030405060700 + uint64(i))
			case reflect.Array:
				for j := 0; j < f.Len(); j++ {
					f.Index(j).SetUint(uint64(i*16 + j))
				}
			}
		}
		if seen != len(tc.offsets) {
			t.Errorf("%s: %d fields, the test knows %d", name, seen, len(tc.offsets))
		}
		for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			b, err := marshalAttr(tc.attr, order)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != tc.size {
				t.Errorf("%s is %d bytes, want %d", name, len(b), tc.size)
				continue
			}
			for i := 0; i < v.NumField(); i++ {
				fname := v.Type().Field(i).Name
				off, ok := tc.offsets[fname]
				if fname == "_" {
					continue
				}
				if !ok {
					t.Errorf("%s.%s: no offset in the test", name, fname)
					continue
				}
				f := v.Field(i)
				switch f.Kind() {
				case reflect.Uint32:
					if got := order.Uint32(b[off:]); uint64(got) != f.Uint() {
						t.Errorf("%s.%s (%v) at %d: %#x, want %#x", name, fname, order, off, got, f.Uint())
					}
				case reflect.Uint64:
					if got := order.Uint64(b[off:]); got != f.Uint() {
						t.Errorf("%s.%s (%v) at %d: %#x, want %#x", name, fname, order, off, got, f.Uint())
					}
				case reflect.Array:
					for j := 0; j < f.Len(); j++ {
						if uint64(b[off+j]) != f.Index(j).Uint() {
							t.Errorf("%s.%s[%d] at %d: %#x", name, fname, j, off+j, b[off+j])
						}
					}
				}
			}
			// What the kernel writes back comes out where it went in.
			back := reflect.New(v.Type())
			if err := unmarshalAttr(b, back.Interface()); err != nil && order == nativeOrder {
				t.Fatal(err)
			}
			if order == nativeOrder && !reflect.DeepEqual(back.Elem().Interface(), v.Interface()) {
				t.Errorf("%s does not survive a round trip", name)
			}
		}
	}
}

func TestObjName(t *testing.T) {
	if n := objName(opsProgName); cString(n[:]) != "surflare_ka_ops" || n[15] != 0 {
		t.Errorf("objName(%q) = %q", opsProgName, n)
	}
	if n := objName("a_name_longer_than_fifteen"); cString(n[:]) != "a_name_longer_t" {
		t.Errorf("long name cut to %q, want the kernel's first 15 characters", cString(n[:]))
	}
}

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		err  bool
	}{
		{"0\n", 1, false},
		{"0-3\n", 4, false},
		{"0-1,4-5\n", 6, false}, // holes: room for the highest
		{"0,2\n", 3, false},
		{"", 0, true},
		{"0-x\n", 0, true},
		{"3-1\n", 0, true},
	} {
		got, err := parseCPUList(tc.in)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("parseCPUList(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestVerifierErrorMessage(t *testing.T) {
	e := &verifierError{errno: unix.EACCES, log: "0: R1=ctx() R10=fp0\n0: (95) exit\nR0 !read_ok\nprocessed 1 insns (limit 1000000) max_states_per_insn 0\n"}
	if got, want := e.Error(), "permission denied (verifier: 0: (95) exit; R0 !read_ok)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(e, unix.EACCES) {
		t.Errorf("verifierError does not unwrap to its errno")
	}
	if got := (&verifierError{errno: unix.EINVAL}).Error(); got != "invalid argument" {
		t.Errorf("without a log: %q", got)
	}
}

func TestHelperRefused(t *testing.T) {
	for _, tc := range []struct {
		log  string
		want bool
	}{
		{"0: (85) call unknown#49\ninvalid func unknown#49\n", true},                            // no such helper
		{"program of this type cannot use helper bpf_setsockopt#49\nprocessed 1 insns\n", true}, // wrong type
		{"unknown func 49\n", true}, // 4.9
		{"0: (85) call bpf_setsockopt#49\nR1 !read_ok\n", false},
		{"invalid func unknown#490\n", false}, // another helper
		{"0: (85) call unknown#49\ninvalid func unknown#49", true},
	} {
		if got := helperRefused(tc.log, bpfFuncSetsockopt); got != tc.want {
			t.Errorf("helperRefused(%q) = %v, want %v", tc.log, got, tc.want)
		}
	}
}
