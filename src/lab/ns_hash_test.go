package lab

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The lab's namespaces get a router-sized TCP hash table of their own, not
// the host's (whose size every socket dump walks): every one of them, as a
// lab makes three at once (lan, router, internet) and the router's is where
// the daemon dumps.
func TestNamespacesGetARouterSizedTCPHash(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	if _, err := os.Stat("/proc/sys/net/ipv4/tcp_child_ehash_entries"); err != nil {
		t.Skip("kernel without per-namespace TCP hash tables (Linux < 5.19)")
	}
	var names []string
	for _, role := range []string{"lan", "router", "internet"} {
		names = append(names, fmt.Sprintf("swtehash%d-%s", os.Getpid(), role))
	}
	hs, err := createNamed(names)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i, h := range hs {
			h.Close()
			_ = deleteNamed(names[i])
		}
	})
	for i, h := range hs {
		var got string
		if err := inNS(h, func() error {
			b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_ehash_entries")
			got = strings.TrimSpace(string(b))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		// A namespace sharing the host's table reads it negated.
		if got != fmt.Sprint(RouterTCPHashEntries) {
			t.Errorf("tcp_ehash_entries in lab namespace %s = %s, want %d (its own, router-sized)", names[i], got, RouterTCPHashEntries)
		}
	}
	host, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_child_ehash_entries")
	if strings.TrimSpace(string(host)) != "0" {
		t.Errorf("the host's tcp_child_ehash_entries changed to %s", host)
	}
}
