package lab

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The lab's namespaces get a router-sized TCP hash table of their own, not
// the host's (whose size every socket dump walks).
func TestNamespacesGetARouterSizedTCPHash(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	if _, err := os.Stat("/proc/sys/net/ipv4/tcp_child_ehash_entries"); err != nil {
		t.Skip("kernel without per-namespace TCP hash tables (Linux < 5.19)")
	}
	name := fmt.Sprintf("swtehash%d", os.Getpid())
	hs, err := createNamed([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		hs[0].Close()
		_ = deleteNamed(name)
	})
	var got string
	if err := inNS(hs[0], func() error {
		b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_ehash_entries")
		got = strings.TrimSpace(string(b))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// A namespace sharing the host's table reads it negated.
	if got != fmt.Sprint(RouterTCPHashEntries) {
		t.Errorf("tcp_ehash_entries in a lab namespace = %s, want %d (its own, router-sized)", got, RouterTCPHashEntries)
	}
	host, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_child_ehash_entries")
	if strings.TrimSpace(string(host)) != "0" {
		t.Errorf("the host's tcp_child_ehash_entries changed to %s", host)
	}
}
