package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/google/nftables"
)

// The router's local resolvers: the real dnsmasq (Debian's dnsmasq-base) on
// :53 forwarding to the real SmartDNS on :6053, configured from the shipped
// files (dns_config.go). Started by Up with Options.DNS, or later with
// StartResolvers.

// Default resolver binaries (Debian packages dnsmasq-base and smartdns).
const (
	DefaultDnsmasq  = "/usr/sbin/dnsmasq"
	DefaultSmartDNS = "/usr/sbin/smartdns"
)

// Process names of the resolvers (Start/Stop, log/<name>.log).
const (
	procDnsmasq  = "dnsmasq"
	procSmartDNS = "smartdns"
)

// DNSOptions configure StartResolvers.
type DNSOptions struct {
	// RepoRoot holds the shipped configuration (files/etc/…); empty means
	// found by walking up from the working directory to go.mod.
	RepoRoot string
	// Dnsmasq and SmartDNS are the binaries (default DefaultDnsmasq,
	// DefaultSmartDNS).
	Dnsmasq, SmartDNS string
}

// DNSQueryLogName is the file in the lab's log directory where the internet's
// resolvers record every question they answer (written by lab/internet).
const DNSQueryLogName = "dns-queries.jsonl"

// DNSQuery is one question an internet resolver answered: who asked (the
// source address it saw) decides whether it came through the tunnel (an
// exit node's address) or directly (the household's WAN address).
type DNSQuery struct {
	Time     time.Time `json:"time"`
	Resolver string    `json:"resolver"` // the address the question was sent to
	From     string    `json:"from"`     // the source address the resolver saw
	Proto    string    `json:"proto"`    // udp, tcp or doh
	Name     string    `json:"name"`     // lower case, no trailing dot
	Type     uint16    `json:"type"`     // 1 = A, 28 = AAAA
}

// StartResolvers starts SmartDNS and then dnsmasq in the router namespace
// and waits until both answer. They are stopped on Close (or StopResolvers).
// The kill switch's domestic_domain_ips set, SmartDNS's nftset target, is
// the firewall's: apply it before expecting domestic answers to land there.
func (l *Lab) StartResolvers(ctx context.Context, o DNSOptions) error {
	if o.Dnsmasq == "" {
		o.Dnsmasq = DefaultDnsmasq
	}
	if o.SmartDNS == "" {
		o.SmartDNS = DefaultSmartDNS
	}
	for _, b := range []string{o.Dnsmasq, o.SmartDNS} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("lab resolvers: %w (apt-get install dnsmasq-base smartdns)", err)
		}
	}
	root := o.RepoRoot
	if root == "" {
		wd, _ := os.Getwd()
		r, err := FindRepoRoot(wd)
		if err != nil {
			return err
		}
		root = r
	}
	sdConf, dmConf, err := l.writeResolverConfigs(root)
	if err != nil {
		return err
	}
	if _, err := l.Start(procSmartDNS, RoleRouter, o.SmartDNS, "-f", "-c", sdConf, "-p", l.Path(dirRun, "smartdns.pid")); err != nil {
		return err
	}
	if err := l.waitResolver(ctx, procSmartDNS, netip.AddrPortFrom(loopback4, SmartDNSPort), ""); err != nil {
		return err
	}
	if _, err := l.Start(procDnsmasq, RoleRouter, o.Dnsmasq, "--keep-in-foreground", "--conf-file="+dmConf); err != nil {
		return err
	}
	if err := l.waitResolver(ctx, procDnsmasq, netip.AddrPortFrom(loopback4, 53), RouterName); err != nil {
		return err
	}
	l.log.Info("lab resolvers up", "dnsmasq", o.Dnsmasq, "smartdns", o.SmartDNS)
	return nil
}

var loopback4 = netip.MustParseAddr("127.0.0.1")

// StopResolvers stops dnsmasq and SmartDNS.
func (l *Lab) StopResolvers() {
	l.Stop(procDnsmasq)
	l.Stop(procSmartDNS)
}

// running reports whether a program started with Start (by name) is still
// running.
func (l *Lab) running(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.procs {
		if p.name != name {
			continue
		}
		select {
		case <-p.done:
		default:
			return true
		}
	}
	return false
}

// waitResolver polls a resolver on the router until it answers name (or,
// with name "", accepts a TCP connection: SmartDNS would forward any name).
func (l *Lab) waitResolver(ctx context.Context, proc string, at netip.AddrPort, name string) error {
	deadline := time.Now().Add(5 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if name == "" {
			dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			c, derr := dialIn(dctx, l.ns[RoleRouter], "tcp", at.String())
			cancel()
			if err = derr; err == nil {
				c.Close()
				return nil
			}
		} else {
			var a DNSAnswer
			if a, err = l.Resolve(ctx, RoleRouter, at, "udp", name, 200*time.Millisecond); err == nil && len(a.Addrs) > 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not answering on %s: %v (see %s)", proc, at, err, l.LogPath(proc))
}

// DNSQueries reads the internet resolvers' query log (oldest first).
func (l *Lab) DNSQueries() ([]DNSQuery, error) {
	f, err := os.Open(l.Path(dirLog, DNSQueryLogName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the DNS query log: %w", err)
	}
	defer f.Close()
	var out []DNSQuery
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var q DNSQuery
		if json.Unmarshal(sc.Bytes(), &q) == nil {
			out = append(out, q)
		}
	}
	return out, sc.Err()
}

// QueriesFor returns the logged questions for name (any resolver).
func (l *Lab) QueriesFor(name string) ([]DNSQuery, error) {
	qs, err := l.DNSQueries()
	var out []DNSQuery
	for _, q := range qs {
		if q.Name == strings.ToLower(strings.TrimSuffix(name, ".")) {
			out = append(out, q)
		}
	}
	return out, err
}

// RouterSetAddrs lists the addresses in a set of the router's nftables
// (e.g. "inet", "killswitch", "domestic_domain_ips").
func (l *Lab) RouterSetAddrs(family, table, set string) ([]netip.Addr, error) {
	fam := map[string]nftables.TableFamily{"inet": nftables.TableFamilyINet, "ip": nftables.TableFamilyIPv4, "ip6": nftables.TableFamilyIPv6}[family]
	if fam == 0 {
		return nil, fmt.Errorf("unknown nftables family %q", family)
	}
	c, err := nftConn(l.ns[RoleRouter])
	if err != nil {
		return nil, err
	}
	s, err := c.GetSetByName(&nftables.Table{Family: fam, Name: table}, set)
	if err != nil {
		return nil, fmt.Errorf("set %s %s %s: %w", family, table, set, err)
	}
	els, err := c.GetSetElements(s)
	if err != nil {
		return nil, fmt.Errorf("reading set %s %s %s: %w", family, table, set, err)
	}
	var out []netip.Addr
	for _, e := range els {
		if a, ok := netip.AddrFromSlice(e.Key); ok && !e.IntervalEnd {
			out = append(out, a)
		}
	}
	return out, nil
}
