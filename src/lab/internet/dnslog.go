package internet

import (
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"surflare-watchdog/src/lab"
	"sync"
)

// QueryLogName is the file (in the lab's log directory) where the plan's
// resolvers record every question they answer (see lab.DNSQuery).
const QueryLogName = lab.DNSQueryLogName

// Query is one question a lab resolver answered.
type Query = lab.DNSQuery

// questionOf extracts the first question of a DNS message.
func questionOf(m []byte) (string, uint16, bool) {
	if len(m) < 12 {
		return "", 0, false
	}
	name, end, err := readName(m, 12)
	if err != nil || end+2 > len(m) {
		return "", 0, false
	}
	return strings.ToLower(name), uint16(m[end])<<8 | uint16(m[end+1]), true
}

// recordQuery reports one question to Config.OnQuery (if set).
func (s *Servers) recordQuery(proto string, local, remote net.Addr, msg []byte) {
	if s.cfg.OnQuery == nil {
		return
	}
	name, qtype, ok := questionOf(msg)
	if !ok {
		return
	}
	s.cfg.OnQuery(Query{Time: s.cfg.Now(), Resolver: addrOf(local), From: addrOf(remote), Proto: proto, Name: name, Type: qtype})
}

func addrOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap().String()
	}
	return a.String()
}

// QueryFileLogger appends each Query to path (created 0644 on first use).
// Write errors are dropped: the log is an observation aid, not a service.
func QueryFileLogger(path string) func(Query) {
	var mu sync.Mutex
	var f *os.File
	return func(q Query) {
		b, err := json.Marshal(q)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if f == nil {
			_ = os.MkdirAll(filepath.Dir(path), 0o755)
			if f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
				f = nil
				return
			}
		}
		f.Write(append(b, '\n'))
	}
}
