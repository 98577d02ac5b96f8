package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"surflare-watchdog/src/lab"
)

// The daemon's ubus interface against the real ubusd and ubus CLI, in the
// lab: ubusd runs in the router namespace on the socket the daemon is
// configured with, and every call is made with the real CLI there, as a
// user, LuCI's rpcd, the hotplug script or the init script would. It runs
// when UBUSD and UBUS_CLI name the binaries built from openwrt/ubus (see
// src/ubus/README.md), as root, without -short.

// labUbus is the real ubusd in a lab router and the CLI that talks to it.
type labUbus struct {
	t    *testing.T
	l    *lab.Lab
	cli  string
	bin  string
	sock string
	acl  string
}

// ubusdSockDir is the directory of ubusd's compiled-in socket: it creates
// it even when told to listen elsewhere.
const ubusdSockDir = "/var/run/ubus"

func newLabUbus(t *testing.T, l *lab.Lab, bin, cli string) *labUbus {
	u := &labUbus{t: t, l: l, cli: cli, bin: bin, sock: l.Path("run", "ubus.sock"), acl: l.Path("run", "ubus-acl.d")}
	if err := os.MkdirAll(u.acl, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ubusdSockDir); errors.Is(err, os.ErrNotExist) {
		t.Cleanup(func() { os.Remove(ubusdSockDir) }) // only if still empty
	}
	return u
}

// start runs ubusd in the router namespace (a lab process: killed with the
// lab) and waits for its socket.
func (u *labUbus) start() {
	u.t.Helper()
	if _, err := u.l.Start("ubusd", lab.RoleRouter, u.bin, "-A", u.acl, "-s", u.sock); err != nil {
		u.t.Fatal(err)
	}
	u.waitOutput("ubusd listening", func() bool { _, code := u.run("list"); return code == 0 })
}

func (u *labUbus) stop() { u.l.Stop("ubusd") }

func (u *labUbus) cmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := u.l.CommandContext(ctx, lab.RoleRouter, append([]string{u.cli, "-s", u.sock}, args...)...)
	cmd.WaitDelay = time.Second
	return cmd
}

// run runs `ubus args...` in the router and returns its output (stdout and
// stderr together) and exit status.
func (u *labUbus) run(args ...string) (string, int) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := u.cmd(ctx, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		u.t.Fatalf("ubus %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// call runs `ubus call surflare method [json]`, wants exit 0 and a JSON
// object, and returns it.
func (u *labUbus) call(method string, args ...string) map[string]any {
	u.t.Helper()
	out, code := u.run(append([]string{"call", "surflare", method}, args...)...)
	if code != 0 {
		u.t.Fatalf("ubus call surflare %s %s: exit %d: %s", method, strings.Join(args, " "), code, out)
	}
	m := map[string]any{}
	if strings.TrimSpace(out) != "" {
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			u.t.Fatalf("ubus call surflare %s: not JSON: %v\n%s", method, err, out)
		}
	}
	return m
}

func (u *labUbus) waitOutput(what string, cond func() bool) {
	u.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			u.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond) // real processes: polling their answers
	}
}

// listener is `ubus listen surflare.state` or `ubus subscribe surflare`
// left running, collecting the members of what it prints.
type listener struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	events []map[string]any
	done   chan struct{}
}

func (u *labUbus) listen() *listener { return u.watch("surflare.state", "listen", "surflare.state") }

// watch runs `ubus args...` and collects the members printed under key.
func (u *labUbus) watch(key string, args ...string) *listener {
	u.t.Helper()
	ls := &listener{done: make(chan struct{})}
	ls.cmd = u.cmd(context.Background(), args...)
	out, err := ls.cmd.StdoutPipe()
	if err != nil {
		u.t.Fatal(err)
	}
	if err := ls.cmd.Start(); err != nil {
		u.t.Fatal(err)
	}
	go func() {
		defer close(ls.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev map[string]map[string]any
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				u.t.Errorf("ubus %s printed %q: %v", args[0], sc.Text(), err)
				continue
			}
			ls.mu.Lock()
			ls.events = append(ls.events, ev[key])
			ls.mu.Unlock()
		}
		ls.cmd.Wait()
	}()
	u.t.Cleanup(func() { ls.cmd.Process.Kill(); <-ls.done })
	return ls
}

func (ls *listener) seen() []map[string]any {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return append([]map[string]any(nil), ls.events...)
}

func TestDaemonUbusAgainstRealUbusdInLab(t *testing.T) {
	bin, cli := os.Getenv("UBUSD"), os.Getenv("UBUS_CLI")
	if bin == "" || cli == "" {
		t.Skip("no real ubusd: set UBUSD and UBUS_CLI (built from openwrt/ubus, see src/ubus/README.md)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the lab runs in network namespaces")
	}
	if testing.Short() {
		t.Skip("-short: the lab needs its binaries built")
	}
	for _, p := range []string{bin, cli} {
		if !filepath.IsAbs(p) {
			t.Fatalf("%s: give an absolute path (it runs inside the lab)", p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, lab.Options{Clients: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	u := newLabUbus(t, l, bin, cli)
	u.start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", l.DaemonLog())
		}
	})
	// The listener is there before the daemon, as procd starts ubusd first.
	events := u.listen()
	if _, err := l.StartDaemon(ctx, labUbusSets(u.sock)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.StopDaemon(context.Background()) })
	healthy := func(node string) {
		t.Helper()
		st, err := l.WaitDaemon(ctx, 60*time.Second, func(s lab.DaemonState) bool { return s.Healthy() && (node == "" || s.Node == node) })
		if err != nil {
			t.Fatalf("waiting for healthy on %q: %v\n%s", node, err, st.Raw)
		}
	}
	healthy("")
	u.waitOutput("surflare on ubus", func() bool { out, _ := u.run("list", "surflare"); return out == "surflare\n" })
	notes := u.watch("state", "subscribe", "surflare")

	out, code := u.run("-v", "list", "surflare")
	if got := labObjectIDs.ReplaceAllString(out, "@ID\n"); got != surflareListing || code != 0 {
		t.Errorf("ubus -v list surflare: exit %d\n%s\nwant\n%s", code, got, surflareListing)
	}
	st := u.call("status")
	ds, err := l.DaemonStatus(ctx)
	if err != nil || st["state"] != ds.State || st["node"] != ds.Node || st["pid"] != float64(ds.PID) {
		t.Errorf("ubus status says %v on %v (pid %v), the control socket %s on %s (pid %d) %v", st["state"], st["node"], st["pid"], ds.State, ds.Node, ds.PID, err)
	}
	if tok := u.call("token"); len(tok["token"].(string)) < 16 || tok["expires_in"] != float64(3600) {
		t.Errorf("token: %v", tok)
	}
	if n := u.call("nodes")["nodes"].([]any); len(n) != 6 {
		t.Errorf("nodes: %v", n)
	}

	// rotate: to a named node, refused for an unknown name or a non-string.
	if r := u.call("rotate", `{"node":"Chicago"}`); r["node"] != "Chicago" {
		t.Errorf("rotate Chicago answered node %v", r["node"])
	}
	healthy("Chicago")
	if e, err := l.ClientEcho(ctx, 0); err != nil || lab.ExitName(e.IP) != "Chicago" {
		t.Errorf("after rotate Chicago the LAN exits at %v (%v)", e, err)
	}
	u.expectFailure([]string{"rotate", `{"node":"Nowhere"}`}, 254, `unknown node \"Nowhere\"`)
	u.expectFailure([]string{"rotate", `{"node":5}`}, 254, "")
	u.expectFailure([]string{"nosuch"}, 253, "")
	if ds, _ := l.DaemonStatus(ctx); ds.Node != "Chicago" {
		t.Errorf("refused rotations moved the daemon to %q", ds.Node)
	}
	if lines := u.call("log", `{"lines":3}`)["lines"].([]any); len(lines) != 3 {
		t.Errorf("log 3: %v", lines)
	}

	// history: the strip LuCI draws, with the rotation to Chicago in it.
	h := u.call("history", `{"span":3600,"buckets":60}`)
	rotations := 0.0
	buckets, _ := h["buckets"].([]any)
	for _, b := range buckets {
		n, _ := b.(map[string]any)["rotations"].(float64)
		rotations += n
	}
	if svg, _ := h["svg"].(string); !strings.HasPrefix(svg, "<svg") || len(buckets) != 60 || rotations < 1 {
		t.Errorf("history: %d buckets, %v rotations, svg %.40q; want 60 buckets, the rotation, a drawing", len(buckets), rotations, h["svg"])
	}
	u.expectFailure([]string{"history", `{"span":10}`}, 254, "want seconds from 300")

	// diag: the engine refuses a rotation; the CLI says why.
	if r := u.call("diag", `{"enable":true}`); r["state"] != "diag" {
		t.Errorf("diag on: state %v", r["state"])
	}
	u.expectFailure([]string{"rotate"}, 248, "diag mode is on")
	u.call("diag", `{"enable":false}`)
	healthy("Chicago")

	// The WAN goes down and up as netifd's hotplug reports it.
	if err := l.Fault(ctx, lab.FaultWANDown, true); err != nil {
		t.Fatal(err)
	}
	if r := u.call("hotplug", `{"action":"ifdown","interface":"wan","device":"pppoe-wan"}`); r["state"] != "wan_down" {
		t.Errorf("hotplug ifdown: state %v", r["state"])
	}
	if err := l.Fault(ctx, lab.FaultWANDown, false); err != nil {
		t.Fatal(err)
	}
	u.call("hotplug", `{"action":"ifup","interface":"wan","device":"pppoe-wan"}`)
	healthy("Chicago")
	u.expectFailure([]string{"hotplug", `{"action":"bogus","interface":"wan"}`}, 254, "want ifup, ifupdate or ifdown")
	u.expectFailure([]string{"hotplug", `{"action":"ifup"}`}, 254, "")

	// A fault while `ubus listen` runs: the current node is black-holed,
	// the daemon rotates away, and the listener sees it happen.
	if err := l.Fault(ctx, lab.FaultNodeBlackhole, true, "Chicago"); err != nil {
		t.Fatal(err)
	}
	u.waitOutput("surflare.state: healthy on another node", func() bool {
		seen := events.seen()
		for i, e := range seen {
			if e["state"] != "healthy" && e["from"] == "healthy" && e["node"] == "Chicago" {
				for _, later := range seen[i+1:] {
					if later["state"] == "healthy" && later["node"] != "Chicago" {
						return true
					}
				}
			}
		}
		return false
	})
	l.Fault(ctx, lab.FaultNodeBlackhole, false, "Chicago")
	evs := events.seen()
	checkEventChain(t, evs)
	// subscribers got the same, from their start on
	ns := notes.seen()
	if len(ns) == 0 || len(ns) > len(evs) || fmt.Sprint(ns) != fmt.Sprint(evs[len(evs)-len(ns):]) {
		t.Errorf("ubus subscribe surflare got %d notifications:\n%v\nwant the last of the events:\n%v", len(ns), ns, evs)
	}

	// reload, then credentials last (a new password would fail the fake
	// vendor's next login): blanks in a password are kept.
	u.call("reload")
	u.expectFailure([]string{"set_credentials", `{"username":"lab@example.org","password":""}`}, 254, "the password is empty")
	const pw = " s3cret pass "
	out, code = u.run("call", "surflare", "set_credentials", `{"username":"lab@example.org","password":"`+pw+`"}`)
	var cs map[string]any
	if err := json.Unmarshal([]byte(out), &cs); err != nil || code != 0 || cs["present"] != true || cs["username"] != "lab@example.org" {
		t.Errorf("set_credentials: exit %d %s", code, out)
	} else if b, err := os.ReadFile(cs["path"].(string)); err != nil || !strings.Contains(string(b), pw+"\n") {
		t.Errorf("stored password file does not hold the password as sent (%v)", err)
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("set_credentials echoed the password: %s", out)
	}

	// ubusd restarts (procd respawn): the daemon registers again and its
	// events reach a new listener.
	u.stop()
	u.start()
	u.waitOutput("surflare back on ubus", func() bool { out, _ := u.run("list", "surflare"); return out == "surflare\n" })
	events = u.listen()
	u.waitOutput("an event after the ubusd restart", func() bool {
		u.call("reconnect")
		return len(events.seen()) > 0
	})
	if st := u.call("status"); st["state"] == nil {
		t.Errorf("status after the ubusd restart: %v", st)
	}
}

// labObjectIDs hides the random object id in `ubus -v list`.
var labObjectIDs = regexp.MustCompile(`@[0-9a-f]{8}\n`)

// surflareListing is what `ubus -v list surflare` must print for the
// daemon's object (arguments in declared order, as libubus would).
const surflareListing = `'surflare' @ID
	"status":{}
	"check":{}
	"rotate":{"node":"String"}
	"reconnect":{}
	"diag":{"enable":"Boolean"}
	"nodes":{}
	"probe":{"node":"String"}
	"reload":{}
	"log":{"lines":"Integer"}
	"history":{"buckets":"Integer","span":"Integer"}
	"hotplug":{"action":"String","interface":"String","device":"String"}
	"token":{}
	"token_write":{}
	"set_credentials":{"username":"String","password":"String"}
	"events":{"since":"Integer","wait":"Integer"}
`

// expectFailure runs `ubus call surflare args...` and wants exit status
// code and, when why is set, {"error": ...} containing it on stdout.
func (u *labUbus) expectFailure(args []string, code int, why string) {
	u.t.Helper()
	out, got := u.run(append([]string{"call", "surflare"}, args...)...)
	if got != code || !strings.Contains(out, "Command failed: ubus call surflare "+strings.Join(args, " ")+" (") {
		u.t.Errorf("ubus call surflare %s: exit %d, want %d:\n%s", strings.Join(args, " "), got, code, out)
	}
	if why != "" && (!strings.Contains(out, `"error": `) || !strings.Contains(out, why)) {
		u.t.Errorf("ubus call surflare %s does not say %q:\n%s", strings.Join(args, " "), why, out)
	}
}

// checkEventChain wants the events a listener saw to be the daemon's
// transitions without a gap or a swap: each one starts where the last
// ended.
func checkEventChain(t *testing.T, evs []map[string]any) {
	t.Helper()
	if len(evs) < 3 {
		t.Fatalf("ubus listen saw %d surflare.state events: %v", len(evs), evs)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i]["from"] != evs[i-1]["state"] {
			t.Errorf("surflare.state #%d is %v -> %v, but the one before ended in %v", i, evs[i]["from"], evs[i]["state"], evs[i-1]["state"])
		}
	}
	for _, e := range evs {
		if e["state"] == nil || e["from"] == nil || e["reason"] == nil || e["node"] == nil {
			t.Errorf("surflare.state event lacks a member: %v", e)
		}
	}
	t.Logf("%d surflare.state events, first %v -> %v", len(evs), evs[0]["from"], evs[0]["state"])
}

// labUbusSets are the daemon's overrides: our ubusd's socket, short
// intervals so transitions come within seconds.
func labUbusSets(sock string) []string {
	return []string{
		"surflare.paths.ubus_socket=" + sock,
		"surflare.main.check_interval=2",
		"surflare.main.degraded_interval=1",
		"surflare.main.fail_threshold=2",
		"surflare.main.probe_timeout=2",
		"surflare.main.connect_dataplane_timeout=15",
	}
}
