package ubus

import (
	"encoding/binary"
	"fmt"
)

// blob attribute header word: EXTENDED flag, 7-bit id, 24-bit raw length
// (header included, trailing padding excluded).
const (
	attrExtended = 0x80000000
	attrIDMask   = 0x7f000000
	attrIDShift  = 24
	attrLenMask  = 0x00ffffff
	blobAlign    = 4
)

// padLen rounds a raw attribute length up to the 4-byte alignment every
// attribute is laid out with.
func padLen(n int) int { return (n + blobAlign - 1) &^ (blobAlign - 1) }

// rawAttr is one undecoded blob attribute; payload aliases the input buffer.
type rawAttr struct {
	id       uint8
	extended bool
	payload  []byte
}

// splitAttrs cuts a container's payload into its children. Children sit back
// to back, each padded to 4 bytes, and must fill the container exactly: a
// short header, a length below 4, or a child (or its padding) running past
// the container is an error, never a panic or an out-of-bounds read.
func splitAttrs(b []byte) ([]rawAttr, error) {
	var out []rawAttr
	off := 0
	for off < len(b) {
		rest := b[off:]
		if len(rest) < attrHeaderLen {
			return nil, fmt.Errorf("offset %d: %d stray bytes, too short for an attribute header", off, len(rest))
		}
		w := binary.BigEndian.Uint32(rest)
		raw := int(w & attrLenMask)
		if raw < attrHeaderLen {
			return nil, fmt.Errorf("offset %d: attribute length %d below %d", off, raw, attrHeaderLen)
		}
		if padLen(raw) > len(rest) {
			return nil, fmt.Errorf("offset %d: attribute length %d (padded %d) runs past its container (%d bytes left)",
				off, raw, padLen(raw), len(rest))
		}
		out = append(out, rawAttr{
			id:       uint8((w & attrIDMask) >> attrIDShift),
			extended: w&attrExtended != 0,
			payload:  rest[attrHeaderLen:raw],
		})
		off += padLen(raw)
	}
	return out, nil
}

// encoder appends blob attributes to a buffer. The first error sticks, so
// callers build a whole message and check once.
type encoder struct {
	buf []byte
	err error
}

func (e *encoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// open starts an attribute and returns its offset for close.
func (e *encoder) open() int {
	off := len(e.buf)
	e.buf = append(e.buf, 0, 0, 0, 0)
	return off
}

// close writes the header of the attribute opened at off, now that its raw
// length is known, and pads it to the alignment.
func (e *encoder) close(off int, id uint8, extended bool) {
	raw := len(e.buf) - off
	if raw > attrLenMask {
		e.fail(fmt.Errorf("attribute of %d bytes exceeds the 24-bit length field", raw))
		raw &= attrLenMask
	}
	w := uint32(id)<<attrIDShift&attrIDMask | uint32(raw)
	if extended {
		w |= attrExtended
	}
	binary.BigEndian.PutUint32(e.buf[off:], w)
	for (len(e.buf)-off)%blobAlign != 0 {
		e.buf = append(e.buf, 0)
	}
}

func (e *encoder) u32(v uint32) { e.buf = binary.BigEndian.AppendUint32(e.buf, v) }

// cstring appends s and its terminating NUL, the way blob strings are stored.
func (e *encoder) cstring(s string) {
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, 0)
}
