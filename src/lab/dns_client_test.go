package lab

import (
	"net/netip"
	"testing"
)

// An answer the way dnsmasq writes it: the question, then A records whose
// names are compression pointers to it.
func TestParseDNSAnswer(t *testing.T) {
	q := dnsQuery(0x1234, "a.foreign.lab")
	resp := append([]byte{}, q...)
	resp[2], resp[3] = 0x81, 0x80 // QR RD RA, NOERROR
	resp[7] = 2                   // two answers
	for _, ip := range [][4]byte{{198, 18, 30, 21}, {198, 18, 30, 22}} {
		resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
		resp = append(resp, ip[:]...)
	}
	rc, addrs, err := parseDNSAnswer(resp, 0x1234)
	if err != nil || rc != RcodeOK || len(addrs) != 2 || addrs[1] != netip.MustParseAddr("198.18.30.22") {
		t.Fatalf("rcode %d addrs %v err %v", rc, addrs, err)
	}
	if _, _, err := parseDNSAnswer(resp, 0x4321); err == nil {
		t.Error("an answer to another question must be refused")
	}
	if _, _, err := parseDNSAnswer(resp[:len(resp)-3], 0x1234); err == nil {
		t.Error("a truncated answer must be refused")
	}
	nx := append([]byte{}, q...)
	nx[2], nx[3] = 0x81, 0x83
	if rc, addrs, err := parseDNSAnswer(nx, 0x1234); err != nil || rc != RcodeNXDomain || len(addrs) != 0 {
		t.Errorf("NXDOMAIN: rcode %d %v %v", rc, addrs, err)
	}
}
