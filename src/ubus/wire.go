// Package ubus speaks OpenWrt's ubus protocol natively, without libubus or cgo:
// the blob/blobmsg codec, a client (lookup, call, events), an object server
// that dispatches method calls to Go handlers, and a Service that keeps the
// daemon's object registered across ubusd restarts. It exists so the watchdog
// can be driven by `ubus call surflare …`, LuCI and hotplug scripts while
// staying one static binary.
//
// The wire format follows the golden traces in ../shared/fixtures/ubus, taken
// from the real ubusd and libubus.
package ubus

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// MsgType is the UBUS_MSG_* type byte of a message header.
type MsgType uint8

// Message types, numbered as in ubusmsg.h.
const (
	MsgHello        MsgType = 0  // ubusd greets a new client; peer = its client id
	MsgStatus       MsgType = 1  // ends a request
	MsgData         MsgType = 2  // data reply, before the status
	MsgPing         MsgType = 3  // ubusd echoes the body
	MsgLookup       MsgType = 4  // find objects by path
	MsgInvoke       MsgType = 5  // call a method (and event/notification delivery)
	MsgAddObject    MsgType = 6  // register an object
	MsgRemoveObject MsgType = 7  // unregister an object
	MsgSubscribe    MsgType = 8  // subscribe an anonymous object to a target
	MsgUnsubscribe  MsgType = 9  // undo a subscription (also sent by ubusd)
	MsgNotify       MsgType = 10 // owner → subscribers; ubusd → owner: subscriber presence
	MsgMonitor      MsgType = 11 // `ubus monitor`
)

var msgTypeNames = [...]string{"HELLO", "STATUS", "DATA", "PING", "LOOKUP", "INVOKE",
	"ADD_OBJECT", "REMOVE_OBJECT", "SUBSCRIBE", "UNSUBSCRIBE", "NOTIFY", "MONITOR"}

func (t MsgType) String() string {
	if int(t) < len(msgTypeNames) {
		return msgTypeNames[t]
	}
	return fmt.Sprintf("MSG_%d", uint8(t))
}

// Framing limits. MaxMessageLen is ubusd's and libubus's UBUS_MAX_MSGLEN in the
// default build: both refuse a message whose padded top-level blob is larger,
// so nothing legitimate can exceed it and nothing bigger is ever buffered.
const (
	headerLen     = 8       // version, type, seq, peer
	attrHeaderLen = 4       // blob id_len word
	MaxMessageLen = 1 << 20 // UBUS_MAX_MSGLEN
	protoVersion  = 0       // libubus drops anything else
)

// System object ids inside ubusd; client-created ids are never below 1024.
const (
	systemObjectEvent = 1 // UBUS_SYSTEM_OBJECT_EVENT: event register/send
	systemObjectMax   = 1024
)

// header is the fixed 8-byte message header.
type header struct {
	Version uint8
	Type    MsgType
	Seq     uint16
	Peer    uint32
}

// readFrame reads one whole message (header + top-level blob) from r.
// Its checks mirror ubus_validate_hdr: version 0, a top-level blob of at least
// its own header and at most MaxMessageLen once padded. A framing error leaves
// the stream out of sync, so callers must drop the connection.
func readFrame(r *bufio.Reader) ([]byte, error) {
	var first [headerLen + attrHeaderLen]byte
	if _, err := io.ReadFull(r, first[:]); err != nil {
		return nil, err
	}
	if first[0] != protoVersion {
		return nil, fmt.Errorf("ubus frame: version %d, want %d", first[0], protoVersion)
	}
	raw := int(binary.BigEndian.Uint32(first[headerLen:]) & attrLenMask)
	if raw < attrHeaderLen {
		return nil, fmt.Errorf("ubus frame: top-level blob length %d below %d", raw, attrHeaderLen)
	}
	if padLen(raw) > MaxMessageLen {
		return nil, fmt.Errorf("ubus frame: top-level blob length %d above limit %d", raw, MaxMessageLen)
	}
	msg := make([]byte, headerLen+raw)
	copy(msg, first[:])
	if _, err := io.ReadFull(r, msg[len(first):]); err != nil {
		return nil, fmt.Errorf("ubus frame: body: %w", err)
	}
	return msg, nil
}
