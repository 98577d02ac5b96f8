package internet

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"surflare-watchdog/src/lab"
)

// Zone is the lab's built-in DNS data: exact names and "*.suffix" wildcards
// (lower case, no trailing dot) to addresses. Both lab resolvers serve it.
type Zone map[string][]netip.Addr

// PlanZone is the zone for the lab plan:
//
//	foreign.lab, *.foreign.lab, search.lab -> Search
//	domestic.lab, *.domestic.lab           -> DomesticWeb
//	ipecho.lab, *.ipecho.lab -> IPEcho (blocked.ipecho.lab is on the vendor's
//	                            rule list, open.ipecho.lab is not: E3)
//	trace.lab -> CDNTrace, api.surflare.lab -> AccountAPI,
//	doh.lab -> DoH, ipv6.lab -> Internet6 (AAAA)
func PlanZone() Zone {
	return Zone{
		"foreign.lab":      {lab.Search},
		"*.foreign.lab":    {lab.Search},
		"search.lab":       {lab.Search},
		"domestic.lab":     {lab.DomesticWeb},
		"*.domestic.lab":   {lab.DomesticWeb},
		"ipecho.lab":       lab.IPEcho,
		"*.ipecho.lab":     lab.IPEcho,
		"trace.lab":        lab.CDNTrace,
		"api.surflare.lab": {lab.AccountAPI},
		"doh.lab":          {lab.DoH},
		"ipv6.lab":         {lab.Internet6},
	}
}

// Lookup returns the addresses for name (exact match first, then the
// nearest wildcard) and whether the name exists at all.
func (z Zone) Lookup(name string) ([]netip.Addr, bool) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if a, ok := z[name]; ok {
		return a, true
	}
	for rest := name; ; {
		_, after, ok := strings.Cut(rest, ".")
		if !ok {
			return nil, false
		}
		if a, ok := z["*."+after]; ok {
			return a, true
		}
		rest = after
	}
}

// DNS wire constants (RFC 1035).
const (
	dnsTypeA    = 1
	dnsTypeAAAA = 28
	dnsClassIN  = 1
	rcodeOK     = 0
	rcodeFormat = 1
	rcodeNX     = 3
	rcodeNotImp = 4
	dnsTTL      = 60
)

// Answer builds the response to one DNS query message from z. A message
// too broken to answer at all returns an error.
func (z Zone) Answer(q []byte) ([]byte, error) {
	if len(q) < 12 {
		return nil, errors.New("dns: short message")
	}
	flags := binary.BigEndian.Uint16(q[2:4])
	if flags&0x8000 != 0 {
		return nil, errors.New("dns: not a query")
	}
	resp := make([]byte, 12, 512)
	copy(resp, q[:4])
	respFlags := uint16(0x8000) | flags&0x7900 | 0x0080 // QR, opcode+RD kept, RA
	qd := binary.BigEndian.Uint16(q[4:6])
	name, end, err := readName(q, 12)
	if qd != 1 || err != nil || end+4 > len(q) || (flags>>11)&0xf != 0 {
		code := uint16(rcodeFormat)
		if (flags>>11)&0xf != 0 {
			code = rcodeNotImp
		}
		binary.BigEndian.PutUint16(resp[2:4], respFlags|code)
		return resp, nil
	}
	qtype := binary.BigEndian.Uint16(q[end : end+2])
	qclass := binary.BigEndian.Uint16(q[end+2 : end+4])
	resp = append(resp, q[12:end+4]...) // the question, verbatim
	binary.BigEndian.PutUint16(resp[4:6], 1)
	addrs, found := z.Lookup(name)
	rcode := uint16(rcodeOK)
	if !found {
		rcode = rcodeNX
	}
	var an uint16
	for _, a := range addrs {
		if qclass != dnsClassIN || (qtype == dnsTypeA) != a.Is4() || (qtype != dnsTypeA && qtype != dnsTypeAAAA) {
			continue
		}
		resp = append(resp, 0xc0, 12) // pointer to the question name
		resp = binary.BigEndian.AppendUint16(resp, qtype)
		resp = binary.BigEndian.AppendUint16(resp, dnsClassIN)
		resp = binary.BigEndian.AppendUint32(resp, dnsTTL)
		b := a.AsSlice()
		resp = binary.BigEndian.AppendUint16(resp, uint16(len(b)))
		resp = append(resp, b...)
		an++
	}
	binary.BigEndian.PutUint16(resp[2:4], respFlags|rcode|0x0400) // AA
	binary.BigEndian.PutUint16(resp[6:8], an)
	return resp, nil
}

// readName decodes an uncompressed question name starting at off.
func readName(m []byte, off int) (string, int, error) {
	var labels []string
	for {
		if off >= len(m) {
			return "", 0, errors.New("dns: name runs past message")
		}
		l := int(m[off])
		off++
		switch {
		case l == 0:
			return strings.Join(labels, "."), off, nil
		case l&0xc0 != 0:
			return "", 0, errors.New("dns: compressed question name")
		case off+l > len(m):
			return "", 0, errors.New("dns: label runs past message")
		}
		labels = append(labels, string(m[off:off+l]))
		off += l
	}
}

// BuildQuery makes a standard recursive query for name/qtype (for tests and
// lab health checks).
func BuildQuery(id uint16, name string, qtype uint16) []byte {
	m := binary.BigEndian.AppendUint16(nil, id)
	m = append(m, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0)
	for _, l := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		m = append(m, byte(len(l)))
		m = append(m, l...)
	}
	m = append(m, 0)
	m = binary.BigEndian.AppendUint16(m, qtype)
	return binary.BigEndian.AppendUint16(m, dnsClassIN)
}

func (s *Servers) serveDNS(ctx context.Context, a netip.Addr, port uint16) error {
	pc, err := listenConfig.ListenPacket(ctx, network("udp", a), hostPort(a, port))
	if err != nil {
		return errors.Join(errors.New("starting dns on "+hostPort(a, port)), err)
	}
	s.onStop(func() { pc.Close() })
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			if resp, err := s.cfg.Zone.Answer(buf[:n]); err == nil {
				s.recordQuery("udp", pc.LocalAddr(), from, buf[:n])
				pc.WriteTo(resp, from)
			}
		}
	}()
	return s.serveTCP(ctx, a, port, "dns", func(c net.Conn) {
		defer c.Close()
		for {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			var l [2]byte
			if _, err := io.ReadFull(c, l[:]); err != nil {
				return
			}
			q := make([]byte, binary.BigEndian.Uint16(l[:]))
			if _, err := io.ReadFull(c, q); err != nil {
				return
			}
			resp, err := s.cfg.Zone.Answer(q)
			if err != nil {
				return
			}
			s.recordQuery("tcp", c.LocalAddr(), c.RemoteAddr(), q)
			if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(resp))), resp...)); err != nil {
				return
			}
		}
	})
}

// dohHandler serves RFC 8484 DoH over plain HTTP (the lab has no TLS):
// GET /dns-query?dns=<base64url> and POST application/dns-message.
func (s *Servers) dohHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var q []byte
		var err error
		switch r.Method {
		case http.MethodGet:
			q, err = base64.RawURLEncoding.DecodeString(r.URL.Query().Get("dns"))
		case http.MethodPost:
			q, err = io.ReadAll(http.MaxBytesReader(w, r.Body, 4096))
		default:
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if err != nil {
			http.Error(w, "bad dns parameter", http.StatusBadRequest)
			return
		}
		resp, err := s.cfg.Zone.Answer(q)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		s.recordQuery("doh", local, remoteAddr(r.RemoteAddr), q)
		w.Header().Set("Content-Type", "application/dns-message")
		w.Write(resp)
	})
}

// remoteAddr turns an http.Request's RemoteAddr into a net.Addr.
func remoteAddr(hp string) net.Addr {
	ap, err := netip.ParseAddrPort(hp)
	if err != nil {
		return nil
	}
	return net.TCPAddrFromAddrPort(ap)
}
