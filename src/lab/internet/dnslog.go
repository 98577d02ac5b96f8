package internet

import (
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// QueryLogName is the file (in the lab's log directory) where the plan's
// resolvers record every question they answer, one JSON object a line, so a
// test in another process can tell who asked what: a foreign name asked by
// an exit node's address went through the tunnel, one asked by the
// household's WAN address did not.
const QueryLogName = "dns-queries.jsonl"

// Query is one question a lab resolver answered.
type Query struct {
	Time     time.Time `json:"time"`
	Resolver string    `json:"resolver"` // the address the question was sent to
	From     string    `json:"from"`     // the source address the resolver saw
	Proto    string    `json:"proto"`    // udp, tcp or doh
	Name     string    `json:"name"`     // lower case, no trailing dot
	Type     uint16    `json:"type"`     // 1 = A, 28 = AAAA
}

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
