package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The router's resolvers run with the configuration the project ships
// (files/etc/smartdns/surflare.conf, files/etc/dnsmasq.d/surflare-smartdns.conf),
// adapted to lab addresses: only the upstream server lines, file paths and
// listen addresses change; groups, nameserver rules and the nftset target
// are the shipped ones, so the lab tests the layout users install.

// Shipped configuration files, relative to the repository root.
const (
	ShippedSmartDNSConf = "files/etc/smartdns/surflare.conf"
	ShippedDnsmasqConf  = "files/etc/dnsmasq.d/surflare-smartdns.conf"
)

// SmartDNSPort is where SmartDNS listens on the router (127.0.0.1), behind
// dnsmasq on :53 — the shipped configuration's port.
const SmartDNSPort = 6053

// RouterName is a name only the router's dnsmasq answers (with LANRouter),
// the way OpenWrt's dnsmasq answers for its own host name: an answer for it
// proves the router answered, whatever resolver address the client asked.
const RouterName = "router.lan"

// DomesticZone is the lab's domestic domain list: the zone's *.domestic.lab.
const DomesticZone = "domestic.lab"

// SmartDNSAdaptation says how the shipped SmartDNS config becomes a lab one.
type SmartDNSAdaptation struct {
	// Servers replaces, per group, every upstream line of that group with
	// these (without group flags; the shipped line's -group and
	// -exclude-default-group are kept). Every group of the shipped file must
	// be listed.
	Servers map[string][]string
	// DomainSets maps a domain-set name to the file the lab writes for it.
	DomainSets map[string]string
	// LogFile replaces log-file.
	LogFile string
	// Extra lines are appended (lab-only settings, e.g. nftset-debug).
	Extra []string
}

// serverDirectives are the SmartDNS upstream directives.
var serverDirectives = map[string]bool{"server": true, "server-tcp": true, "server-tls": true, "server-https": true}

// AdaptSmartDNSConfig rewrites the shipped SmartDNS configuration for the
// lab. It fails when the shipped file has a group, domain set or directive
// the adaptation does not cover, so a change to the shipped layout cannot
// silently go untested.
func AdaptSmartDNSConfig(shipped string, a SmartDNSAdaptation) (string, error) {
	var out []string
	emitted := map[string]bool{}
	for i, line := range strings.Split(shipped, "\n") {
		where := fmt.Sprintf("%s:%d", ShippedSmartDNSConf, i+1)
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			out = append(out, line)
			continue
		}
		switch {
		case serverDirectives[f[0]]:
			group, flags := serverGroup(f)
			if group == "" {
				return "", fmt.Errorf("%s: upstream %q has no -group: every shipped upstream belongs to a named group", where, line)
			}
			lab, ok := a.Servers[group]
			if !ok {
				return "", fmt.Errorf("%s: no lab servers for group %q", where, group)
			}
			if !emitted[group] {
				emitted[group] = true
				for _, s := range lab {
					out = append(out, s+" "+flags)
				}
			}
		case f[0] == "domain-set":
			name, file := flagValue(f, "-name"), flagValue(f, "-file")
			labFile, ok := a.DomainSets[name]
			if !ok || file == "" {
				return "", fmt.Errorf("%s: no lab file for domain-set %q", where, name)
			}
			out = append(out, strings.Replace(line, file, labFile, 1))
		case f[0] == "log-file" && a.LogFile != "":
			out = append(out, "log-file "+a.LogFile)
		case f[0] == "cache-file":
			// The lab never persists a cache.
		default:
			out = append(out, line)
		}
	}
	for g := range a.Servers {
		if !emitted[g] {
			return "", fmt.Errorf("%s has no group %q: the lab adaptation is out of date", ShippedSmartDNSConf, g)
		}
	}
	out = append(out, "", "# --- lab only ---")
	out = append(out, a.Extra...)
	return strings.Join(out, "\n") + "\n", nil
}

// serverGroup returns the -group of an upstream line and its group flags.
func serverGroup(f []string) (group, flags string) {
	var fl []string
	for i := 1; i < len(f); i++ {
		switch f[i] {
		case "-group", "-g":
			if i+1 < len(f) {
				group = f[i+1]
				fl = append(fl, "-group", group)
				i++
			}
		case "-exclude-default-group":
			fl = append(fl, f[i])
		}
	}
	return group, strings.Join(fl, " ")
}

func flagValue(f []string, name string) string {
	for i := 1; i+1 < len(f); i++ {
		if f[i] == name {
			return f[i+1]
		}
	}
	return ""
}

// labSmartDNS is the lab adaptation: the foreign resolver over TCP (the lab
// tunnel, like the contract's proxy, carries TCP only), the domestic
// resolver plain (the lab has no TLS) for the domestic and bootstrap groups.
func (l *Lab) labSmartDNS() SmartDNSAdaptation {
	domestic := "server " + DomesticDNS.String() + ":53"
	return SmartDNSAdaptation{
		Servers: map[string][]string{
			"foreign":   {"server-tcp " + ForeignDNS.String() + ":53"},
			"domestic":  {domestic},
			"bootstrap": {domestic},
		},
		DomainSets: map[string]string{"domestic": l.Path(dirConfig, "domestic-domains.conf")},
		LogFile:    l.Path(dirLog, "smartdns.log"),
		Extra: []string{
			"cache-persist no",
			"log-level info",
			"nftset-debug yes",
		},
	}
}

// labDnsmasq is the shipped dnsmasq snippet plus what the lab router needs:
// listen on lo and br-lan only, run as root in the foreground's files,
// answer RouterName itself, forward every query (no cache, so each test
// query reaches SmartDNS) and log the queries.
func (l *Lab) labDnsmasq(shipped string) string {
	lines := []string{
		strings.TrimRight(shipped, "\n"), "",
		"# --- lab only ---",
		"port=53",
		"listen-address=127.0.0.1",
		"listen-address=" + LANRouter.String(),
		"bind-interfaces",
		"user=root",
		"no-hosts",
		"host-record=" + RouterName + "," + LANRouter.String(),
		"cache-size=0",
		"log-queries",
		"log-facility=" + l.Path(dirLog, "dnsmasq-queries.log"),
		"pid-file=" + l.Path(dirRun, "dnsmasq.pid"),
	}
	return strings.Join(lines, "\n") + "\n"
}

// writeResolverConfigs writes the lab's smartdns.conf, dnsmasq.conf and
// domain list from the shipped files under root, and returns their paths.
func (l *Lab) writeResolverConfigs(root string) (smartdns, dnsmasq string, err error) {
	read := func(rel string) (string, error) {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return "", fmt.Errorf("reading the shipped resolver config: %w", err)
		}
		return string(b), nil
	}
	sd, err := read(ShippedSmartDNSConf)
	if err != nil {
		return "", "", err
	}
	dm, err := read(ShippedDnsmasqConf)
	if err != nil {
		return "", "", err
	}
	conf, err := AdaptSmartDNSConfig(sd, l.labSmartDNS())
	if err != nil {
		return "", "", err
	}
	smartdns, dnsmasq = l.Path(dirConfig, "smartdns.conf"), l.Path(dirConfig, "dnsmasq.conf")
	files := map[string]string{
		smartdns: conf,
		dnsmasq:  l.labDnsmasq(dm),
		l.Path(dirConfig, "domestic-domains.conf"): DomesticZone + "\n",
	}
	for p, c := range files {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			return "", "", fmt.Errorf("writing resolver config: %w", err)
		}
	}
	return smartdns, dnsmasq, nil
}
