package lab

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"
)

// A minimal DNS stub client for lab hosts: one A question, over UDP or TCP,
// sent from inside a role's namespace like a program running there.

// DNSAnswer is what a lab host got back for one A question.
type DNSAnswer struct {
	Rcode   int          // 0 NOERROR, 3 NXDOMAIN, …
	Addrs   []netip.Addr // the A records
	Elapsed time.Duration
}

// DNS rcodes the tests look at.
const (
	RcodeOK       = 0
	RcodeNXDomain = 3
)

// Resolve asks server (UDP or TCP, proto "udp"/"tcp") for name's A records
// from inside role's namespace, waiting at most timeout.
func (l *Lab) Resolve(ctx context.Context, role string, server netip.AddrPort, proto, name string, timeout time.Duration) (DNSAnswer, error) {
	ns, err := l.NS(role)
	if err != nil {
		return DNSAnswer{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	conn, err := dialIn(ctx, ns, proto, server.String())
	if err != nil {
		return DNSAnswer{Elapsed: time.Since(start)}, fmt.Errorf("dns %s %s: %w", proto, server, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	var idb [2]byte
	rand.Read(idb[:])
	id := binary.BigEndian.Uint16(idb[:])
	q := dnsQuery(id, name)
	var resp []byte
	if proto == "tcp" {
		if _, err = conn.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err == nil {
			var n [2]byte
			if _, err = io.ReadFull(conn, n[:]); err == nil {
				resp = make([]byte, binary.BigEndian.Uint16(n[:]))
				_, err = io.ReadFull(conn, resp)
			}
		}
	} else {
		if _, err = conn.Write(q); err == nil {
			buf := make([]byte, 4096)
			var n int
			for {
				n, err = conn.Read(buf)
				// Skip stray datagrams (a late answer to an earlier query).
				if err != nil || (n >= 2 && binary.BigEndian.Uint16(buf[:2]) == id) {
					break
				}
			}
			resp = buf[:n]
		}
	}
	a := DNSAnswer{Elapsed: time.Since(start)}
	if err != nil {
		return a, fmt.Errorf("dns %s %s %s: %w", proto, server, name, err)
	}
	a.Rcode, a.Addrs, err = parseDNSAnswer(resp, id)
	if err != nil {
		return a, fmt.Errorf("dns %s %s %s: %w", proto, server, name, err)
	}
	return a, nil
}

// ClientResolve asks server:53 over UDP from LAN client i (a client with a
// hard-coded resolver, the case dns_enforce exists for).
func (l *Lab) ClientResolve(ctx context.Context, client int, server netip.Addr, name string, timeout time.Duration) (DNSAnswer, error) {
	if client < 0 || client >= len(l.clients) {
		return DNSAnswer{}, fmt.Errorf("lab %s has no client %d", l.Prefix, client)
	}
	return l.Resolve(ctx, l.clients[client].Role, netip.AddrPortFrom(server, 53), "udp", name, timeout)
}

// UniqueName returns a fresh name under zone ("foreign.lab",
// "domestic.lab"), so no resolver on the way can answer from its cache.
func UniqueName(prefix, zone string) string {
	var b [4]byte
	rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:]) + "." + zone
}

// dnsQuery builds a recursive A question.
func dnsQuery(id uint16, name string) []byte {
	m := binary.BigEndian.AppendUint16(nil, id)
	m = append(m, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0) // RD; one question
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		m = append(m, byte(len(label)))
		m = append(m, label...)
	}
	m = append(m, 0, 0, 1, 0, 1) // root; type A; class IN
	return m
}

var errShortDNS = errors.New("truncated DNS answer")

// parseDNSAnswer returns the rcode and A records of a response to id.
func parseDNSAnswer(m []byte, id uint16) (int, []netip.Addr, error) {
	if len(m) < 12 {
		return 0, nil, errShortDNS
	}
	if binary.BigEndian.Uint16(m[:2]) != id || m[2]&0x80 == 0 {
		return 0, nil, errors.New("not the answer to our question")
	}
	rcode := int(m[3] & 0x0f)
	qd, an := int(binary.BigEndian.Uint16(m[4:6])), int(binary.BigEndian.Uint16(m[6:8]))
	off := 12
	var err error
	for range qd {
		if off, err = skipName(m, off); err != nil {
			return rcode, nil, err
		}
		off += 4
	}
	var addrs []netip.Addr
	for range an {
		if off, err = skipName(m, off); err != nil {
			return rcode, nil, err
		}
		if off+10 > len(m) {
			return rcode, nil, errShortDNS
		}
		typ, rdlen := binary.BigEndian.Uint16(m[off:]), int(binary.BigEndian.Uint16(m[off+8:]))
		off += 10
		if off+rdlen > len(m) {
			return rcode, nil, errShortDNS
		}
		if typ == 1 && rdlen == 4 {
			addrs = append(addrs, netip.AddrFrom4([4]byte(m[off:off+4])))
		}
		off += rdlen
	}
	return rcode, addrs, nil
}

// skipName steps over a (possibly compressed) name.
func skipName(m []byte, off int) (int, error) {
	for {
		if off >= len(m) {
			return 0, errShortDNS
		}
		l := int(m[off])
		switch {
		case l == 0:
			return off + 1, nil
		case l&0xc0 == 0xc0:
			return off + 2, nil
		}
		off += 1 + l
	}
}
