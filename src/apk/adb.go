package apk

import (
	"encoding/binary"
	"fmt"
)

// value is one ADB value: a 4-bit type and a 28-bit payload, which is the
// number itself for small integers and an offset into the ADB block for
// everything else. Zero is null: an absent field.
type value uint32

// Value types, as apk-tools' adb.h numbers them.
const (
	typeMask   = 0xf0000000
	valueMask  = 0x0fffffff
	typeInt    = 0x10000000 // the value is the integer (< 2^28)
	typeInt32  = 0x20000000 // offset of a little-endian uint32
	typeInt64  = 0x30000000 // offset of a little-endian uint64
	typeBlob8  = 0x80000000 // offset of a uint8 length, then the bytes
	typeBlob16 = 0x90000000 // offset of a uint16 length, then the bytes
	typeBlob32 = 0xa0000000 // offset of a uint32 length, then the bytes
	typeArray  = 0xd0000000 // offset of an array of values, [0] = count
	typeObject = 0xe0000000 // offset of an object's field values, [0] = count
)

// adbHeaderSize is struct adb_hdr at the start of the ADB block:
// compat version, version, reserved, and the root value.
const adbHeaderSize = 8

// writer builds an ADB block as apk-tools' adb_w_* functions do. Every
// value written through data() is de-duplicated: identical bytes (length
// prefix included) written again reuse the earlier offset when it has the
// alignment asked for, otherwise they are written anew and the new offset
// is the one remembered (adb_w_data replaces the bucket entry).
type writer struct {
	buf   []byte
	cache map[string]int
}

func newWriter() *writer {
	return &writer{buf: make([]byte, adbHeaderSize), cache: map[string]int{}}
}

// raw appends data at the next offset aligned to align, zero-padding the
// gap, and returns that offset. It does not de-duplicate.
func (w *writer) raw(data []byte, align int) int {
	for len(w.buf)%align != 0 {
		w.buf = append(w.buf, 0)
	}
	off := len(w.buf)
	w.buf = append(w.buf, data...)
	return off
}

func (w *writer) data(data []byte, align int) int {
	if off, ok := w.cache[string(data)]; ok && off%align == 0 {
		return off
	}
	off := w.raw(data, align)
	w.cache[string(data)] = off
	return off
}

func (w *writer) checkOffset(off int) {
	if off > valueMask {
		// 256 MiB of metadata: far beyond any package; a silent wrap would
		// write a corrupt package.
		panic(fmt.Sprintf("apk: ADB block offset %d does not fit 28 bits", off))
	}
}

// blobData is a blob's length prefix and bytes, and the alignment and type
// the prefix width implies (adb_w_blob_vec).
func blobData(b []byte) ([]byte, int, value) {
	switch n := len(b); {
	case n > 0xffff:
		return append(binary.LittleEndian.AppendUint32(nil, uint32(n)), b...), 4, typeBlob32
	case n > 0xff:
		return append(binary.LittleEndian.AppendUint16(nil, uint16(n)), b...), 2, typeBlob16
	default:
		return append([]byte{byte(n)}, b...), 1, typeBlob8
	}
}

// blob writes a byte string; an empty one is null.
func (w *writer) blob(b []byte) value {
	if len(b) == 0 {
		return 0
	}
	d, align, typ := blobData(b)
	off := w.data(d, align)
	w.checkOffset(off)
	return typ | value(off)
}

// blobRaw writes a blob that is never shared with another value, so it can
// be patched in place later (the package's unique id).
func (w *writer) blobRaw(b []byte) (value, int) {
	d, align, typ := blobData(b)
	off := w.raw(d, align)
	w.checkOffset(off)
	return typ | value(off), off + len(d) - len(b)
}

func (w *writer) str(s string) value { return w.blob([]byte(s)) }

// integer stores small numbers in the value itself and larger ones as
// 32- or 64-bit data, 4-byte aligned (adb_w_int).
func (w *writer) integer(n uint64) value {
	switch {
	case n >= 1<<32:
		off := w.data(binary.LittleEndian.AppendUint64(nil, n), 4)
		w.checkOffset(off)
		return typeInt64 | value(off)
	case n >= typeInt:
		off := w.data(binary.LittleEndian.AppendUint32(nil, uint32(n)), 4)
		w.checkOffset(off)
		return typeInt32 | value(off)
	}
	return typeInt | value(n)
}

// object writes the field values fields[1:] (fields[0] is the count slot)
// with trailing nulls dropped; an object with no field set is null. The
// type is typeObject or typeArray: mkpkg commits arrays nested in objects
// with adb_w_obj, so most arrays in a package are typed as objects, and
// readers accept either.
func (w *writer) object(fields []value, typ value) value {
	n := len(fields)
	for n > 1 && fields[n-1] == 0 {
		n--
	}
	if n <= 1 {
		return 0
	}
	b := binary.LittleEndian.AppendUint32(nil, uint32(n))
	for _, f := range fields[1:n] {
		b = binary.LittleEndian.AppendUint32(b, uint32(f))
	}
	off := w.data(b, 4)
	w.checkOffset(off)
	return typ | value(off)
}

// setRoot stores the root value in the ADB header.
func (w *writer) setRoot(v value) {
	binary.LittleEndian.PutUint32(w.buf[4:8], uint32(v))
}

// Block types of the container.
const (
	blockADB  = 0
	blockSig  = 1
	blockData = 2
	blockExt  = 3

	blockAlign = 8
	// blockMaxSmall is the largest payload a 4-byte block header can
	// describe (30 bits of size, header included).
	blockMaxSmall = 0x3fffffff - 4
)

// appendBlock appends one container block: its header, the payload parts
// and zero padding to 8 bytes (adb_c_block, adb_c_block_data).
func appendBlock(out []byte, typ uint32, parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	raw := 4 + n
	if n <= blockMaxSmall {
		out = binary.LittleEndian.AppendUint32(out, typ<<30|uint32(4+n))
	} else {
		raw = 16 + n
		out = binary.LittleEndian.AppendUint32(out, blockExt<<30|typ)
		out = binary.LittleEndian.AppendUint32(out, 0)
		out = binary.LittleEndian.AppendUint64(out, uint64(16+n))
	}
	for _, p := range parts {
		out = append(out, p...)
	}
	for ; raw%blockAlign != 0; raw++ {
		out = append(out, 0)
	}
	return out
}
