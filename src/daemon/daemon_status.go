package daemon

import (
	"context"
	"os"
	"sort"
	"time"

	"github.com/google/nftables"
	"github.com/ti-mo/conntrack"

	"surflare-watchdog/src/control"
	"surflare-watchdog/src/credentials"
	"surflare-watchdog/src/detect"
	"surflare-watchdog/src/keepalive"
	"surflare-watchdog/src/loopguard"
	"surflare-watchdog/src/storm503"
	"surflare-watchdog/src/watchdog"
)

// daemonStatus is what `status --json`, ubus and the API show: the engine's
// snapshot (its fields stay at the top level, names stable) plus what the
// daemon around it knows — the detectors in detail, the proxy's descriptors
// against its limit, the kernel's table sizes and connection count.
type daemonStatus struct {
	watchdog.Status
	PID    int          `json:"pid"`
	Daemon daemonExtras `json:"daemon"`
}

type daemonExtras struct {
	Config      string                 `json:"config"`
	Role        string                 `json:"role"`
	WAN         wanInfo                `json:"wan"`
	ProbePath   string                 `json:"probe_path"` // where probe 7 runs from
	Proxy       proxyInfo              `json:"proxy"`
	Keepalive   keepalive.Status       `json:"keepalive"`
	LoopGuard   *loopguard.State       `json:"loopguard,omitempty"`
	Detector    *detect.Status         `json:"early_detector,omitempty"`
	LogHealth   *logHealthSummary      `json:"log_health,omitempty"`
	Storm503    *storm503.State        `json:"storm_503,omitempty"`
	Conntrack   conntrackInfo          `json:"conntrack"`
	NFT         []nftTable             `json:"nft"`
	Credentials credentials.StatusInfo `json:"credentials"`
	Web         string                 `json:"web,omitempty"`
}

type logHealthSummary struct {
	Pairs int    `json:"pairs_with_errors"`
	Dead  int    `json:"dead"`
	Lines int64  `json:"lines_read"`
	Error string `json:"error,omitempty"`
}

type conntrackInfo struct {
	Entries uint32 `json:"entries"`
	Max     uint32 `json:"max"`
	Error   string `json:"error,omitempty"`
}

// nftTable is one table of ours (or the vendor's) with its sizes.
type nftTable struct {
	Name  string         `json:"name"` // "inet killswitch"
	Rules int            `json:"rules"`
	Sets  map[string]int `json:"sets"` // elements per set (interval sets count boundaries)
}

// ourTables are the tables whose sizes status reports.
var ourTables = map[string]bool{"killswitch": true, "sw_lan_tproxy": true, "sw_lan_tproxy6": true,
	"dns_enforce": true, "surflare_moat": true, "watchdog_trace": true, "surflare": true}

func nftSizes() []nftTable {
	c, err := nftables.New()
	if err != nil {
		return nil
	}
	defer c.CloseLasting()
	tables, err := c.ListTables()
	if err != nil {
		return nil
	}
	var out []nftTable
	for _, t := range tables {
		if !ourTables[t.Name] {
			continue
		}
		nt := nftTable{Name: familyWord(t.Family) + " " + t.Name, Sets: map[string]int{}}
		if chains, err := c.ListChainsOfTableFamily(t.Family); err == nil {
			for _, ch := range chains {
				if ch.Table.Name != t.Name {
					continue
				}
				if rs, err := c.GetRules(t, ch); err == nil {
					nt.Rules += len(rs)
				}
			}
		}
		if sets, err := c.GetSets(t); err == nil {
			for _, s := range sets {
				if es, err := c.GetSetElements(s); err == nil {
					nt.Sets[s.Name] = len(es)
				}
			}
		}
		out = append(out, nt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func familyWord(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyINet:
		return "inet"
	case nftables.TableFamilyIPv4:
		return "ip"
	case nftables.TableFamilyIPv6:
		return "ip6"
	}
	return "other"
}

func conntrackCount() conntrackInfo {
	c, err := conntrack.Dial(nil)
	if err != nil {
		return conntrackInfo{Error: err.Error()}
	}
	defer c.Close()
	st, err := c.StatsGlobal()
	if err != nil {
		return conntrackInfo{Error: err.Error()}
	}
	return conntrackInfo{Entries: st.Entries, Max: st.MaxEntries}
}

// status assembles the full snapshot.
func (d *Daemon) status(ctx context.Context) daemonStatus {
	now := time.Now()
	c := d.cfgs.Get()
	x := daemonExtras{
		Config:      d.cfgs.Path(),
		Role:        d.role,
		WAN:         d.wan(),
		ProbePath:   "none (laptop or probe namespace unavailable)",
		Keepalive:   d.sig.clamp.Status(),
		Conntrack:   conntrackCount(),
		NFT:         nftSizes(),
		Credentials: credentials.Status(d.credOpts(c)),
		Web:         d.webAddr,
	}
	if d.probe != nil {
		x.ProbePath = "namespace on " + c.Main.LANInterface + " via " + d.probe.hostIf + ", " + d.probe.addr.String()
	}
	if d.sig.proxy != nil {
		x.Proxy = d.sig.proxy.info()
	}
	if g := d.sig.guard; g != nil {
		st := g.State()
		x.LoopGuard = &st
	}
	if det := d.sig.det; det != nil {
		st := det.Status(now)
		x.Detector = &st
	}
	if lh := d.sig.lh; lh != nil {
		r := lh.Report()
		s := &logHealthSummary{Pairs: len(r.Nodes), Lines: lh.Stats().Lines}
		for _, p := range r.Nodes {
			if !p.UrltestHealthy {
				s.Dead++
			}
		}
		x.LogHealth = s
	}
	if st := d.sig.storm; st != nil {
		s := st.State(now)
		x.Storm503 = &s
	}
	return daemonStatus{Status: d.w.Status(), PID: os.Getpid(), Daemon: x}
}

// handle is the control socket's handler: status gets the full snapshot;
// every other command goes to the engine and answers with the snapshot
// taken after it.
func (d *Daemon) handle(ctx context.Context, req control.Request) (any, error) {
	if req.Cmd == control.CmdStatus {
		return d.status(ctx), nil
	}
	if data, ok, err := d.handleProbe(req); ok {
		return data, err
	}
	if _, err := d.w.HandleCommand(ctx, req.Cmd, req.Args); err != nil {
		return nil, err
	}
	return d.status(ctx), nil
}
