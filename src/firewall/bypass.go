package firewall

import (
	"bufio"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"

	"surflare-watchdog/src/route"
)

// DHCPLeasesFile is dnsmasq's lease file on OpenWrt.
const DHCPLeasesFile = "/tmp/dhcp.leases"

// ParseDHCPLeases reads dnsmasq leases ("expiry mac ip hostname clientid",
// one per line) into addresses per MAC. Malformed lines are skipped: the file
// is rewritten by dnsmasq at any time and a torn read must not fail a sync.
func ParseDHCPLeases(r io.Reader) map[string][]netip.Addr {
	out := map[string][]netip.Addr{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		mac, err := net.ParseMAC(f[1])
		if err != nil || len(mac) != 6 {
			continue
		}
		a, err := netip.ParseAddr(f[2])
		if err != nil {
			continue
		}
		out[mac.String()] = append(out[mac.String()], a.Unmap())
	}
	return out
}

// ResolveBypassFrom resolves the bypass devices of s with the leases in
// leasesFile (an unreadable file gives none) and the neighbour table:
// what both `firewall apply` and the daemon do before applying.
func ResolveBypassFrom(s Spec, leasesFile string, neigh []route.Neighbour) Spec {
	if len(s.Bypass) == 0 {
		return s
	}
	leases := map[string][]netip.Addr{}
	if f, err := os.Open(leasesFile); err == nil {
		leases = ParseDHCPLeases(f)
		f.Close()
	}
	s.Bypass = ResolveBypass(s.Bypass, leases, neigh)
	return s
}

// ResolveBypass adds to each device the addresses its MAC currently has, from
// the DHCP leases and the neighbour table, to its configured ones. The MAC
// stays the primary match; the addresses are what bypass_src and vpn_bypass
// match where a MAC cannot be seen.
func ResolveBypass(devs []Device, leases map[string][]netip.Addr, neigh []route.Neighbour) []Device {
	out := make([]Device, len(devs))
	for i, d := range devs {
		d.IPs = append([]netip.Addr(nil), d.IPs...)
		if d.MAC != nil {
			d.IPs = append(d.IPs, leases[d.MAC.String()]...)
			for _, n := range neigh {
				if n.MAC.String() == d.MAC.String() && !n.IP.IsLinkLocalUnicast() {
					d.IPs = append(d.IPs, n.IP)
				}
			}
		}
		out[i] = d
	}
	return out
}
