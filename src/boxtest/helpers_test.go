package boxtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/lab"
	"surflare-watchdog/src/owrtbox"
	"surflare-watchdog/src/testenv"
)

// needBox skips unless the box tests can run here, and returns the repo
// root and the ipks to install.
func needBox(t *testing.T) (root string, ipks []string) {
	t.Helper()
	if testing.Short() {
		t.Skip("box tests boot OpenWrt: not in -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("box tests need root (network namespaces, the box)")
	}
	root = testenv.RepoRoot(t)
	if _, err := owrtbox.Locate(root); err != nil {
		t.Skipf("skipping: %v", err)
	}
	ipks, err := lab.NewestIPKs(filepath.Join(root, "build", "ipk"))
	if err != nil {
		t.Skipf("skipping: %v (make test builds them first)", err)
	}
	return root, ipks
}

// upBox brings up a lab whose router is OpenWrt and closes it when the
// test ends (the box's log tail is printed if the test failed).
func upBox(t *testing.T, ctx context.Context, ow lab.OpenWrt) *lab.Lab {
	t.Helper()
	root, ipks := needBox(t)
	if len(ow.IPKs) == 0 {
		ow.IPKs = ipks
	}
	start := time.Now()
	l, err := lab.Up(ctx, lab.Options{RepoRoot: root, Clients: 1, OpenWrt: &ow})
	if err != nil {
		t.Fatalf("lab with the OpenWrt router: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() && l.Box().PID != 0 {
			if r, err := l.Box().Run(context.Background(), "logread | tail -80"); err == nil {
				t.Logf("box log tail:\n%s", r.Out)
			}
		}
		if err := l.Close(); err != nil {
			t.Errorf("closing the lab: %v", err)
		}
	})
	t.Logf("lab %s: OpenWrt router up (box pid %d) in %s", l.Prefix, l.Box().PID, time.Since(start).Round(time.Millisecond))
	return l
}

// check logs one line of the checklist.
func check(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("✓ "+format, args...)
}

// sh runs script in the box and fails the test on a non-zero exit.
func sh(t *testing.T, ctx context.Context, l *lab.Lab, script string) string {
	t.Helper()
	out, err := l.Box().Exec(ctx, script)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// ubusStatus is `ubus call surflare status` in the box, decoded.
func ubusStatus(ctx context.Context, l *lab.Lab) (map[string]any, error) {
	out, err := l.Box().Exec(ctx, "ubus -t 5 call surflare status")
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return nil, fmt.Errorf("ubus call surflare status: %w: %.300s", err, out)
	}
	return m, nil
}

// waitStatus polls `ubus call surflare status` until cond holds.
func waitStatus(t *testing.T, ctx context.Context, l *lab.Lab, timeout time.Duration, what string, cond func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last map[string]any
	var lastErr error
	for time.Now().Before(deadline) {
		m, err := ubusStatus(ctx, l)
		if err == nil && cond(m) {
			return m
		}
		last, lastErr = m, err
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("ubus status never showed %s within %s (last: state=%v mode=%v err=%v)", what, timeout, last["state"], last["mode"], lastErr)
	return nil
}

// servicePID is the daemon's pid as procd reports it (`ubus call service
// list`), 0 when the instance is not running.
func servicePID(ctx context.Context, l *lab.Lab) (int, error) {
	out, err := l.Box().Exec(ctx, `ubus call service list '{"name":"surflare-watchdog"}'`)
	if err != nil {
		return 0, err
	}
	var m map[string]struct {
		Instances map[string]struct {
			Running bool `json:"running"`
			PID     int  `json:"pid"`
		} `json:"instances"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return 0, fmt.Errorf("ubus call service list: %w: %.300s", err, out)
	}
	in := m["surflare-watchdog"].Instances["main"]
	if !in.Running {
		return 0, nil
	}
	return in.PID, nil
}

// tables lists `nft list tables` in the router (family name per line).
func tables(t *testing.T, ctx context.Context, l *lab.Lab) map[string]bool {
	t.Helper()
	out := sh(t, ctx, l, "nft list tables")
	m := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "table" {
			m[f[1]+" "+f[2]] = true
		}
	}
	return m
}

// ourTables are the nftables tables the daemon owns (DESIGN §5); the
// vendor's inet surflare is not among them.
var ourTables = []string{"inet killswitch", "ip sw_lan_tproxy", "ip dns_enforce", "inet surflare_moat", "inet surflare_boot_lock", "inet watchdog_trace"}

// luci is a LuCI-style JSON-RPC client of the router's uhttpd /ubus
// endpoint: what LuCI's JavaScript sends. It connects from the router
// namespace to 127.0.0.1, not from the LAN client: the lab's LAN is
// 198.18.1.0/24, outside the private ranges the daemon's LAN tproxy
// exempts, so a LAN client's TCP to the router's own address is captured
// by the proxy (a daemon gap the report describes; on a 192.168.x LAN it
// does not arise).
type luci struct {
	c       *http.Client
	session string
}

// anonSession is rpcd's unauthenticated session id.
const anonSession = "00000000000000000000000000000000"

func newLuci(t *testing.T, l *lab.Lab) *luci {
	t.Helper()
	c, err := l.HTTPClient(lab.RoleRouter, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return &luci{c: c, session: anonSession}
}

// rpcError is a JSON-RPC error (rpcd: -32002 Access denied).
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// call is ubus call OBJECT METHOD ARGS through uhttpd-mod-ubus. It returns
// the ubus status and the reply; a JSON-RPC error (access denied) is err.
func (c *luci) call(ctx context.Context, object, method string, args map[string]any) (int, map[string]any, error) {
	if args == nil {
		args = map[string]any{}
	}
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "call",
		"params": []any{c.session, object, method, args},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1/ubus", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var r struct {
		Result []json.RawMessage `json:"result"`
		Error  *rpcError         `json:"error"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return 0, nil, fmt.Errorf("%s.%s: HTTP %d: %w: %.200s", object, method, resp.StatusCode, err, raw)
	}
	if r.Error != nil {
		return 0, nil, r.Error
	}
	if len(r.Result) == 0 {
		return 0, nil, fmt.Errorf("%s.%s: empty result: %.200s", object, method, raw)
	}
	var code int
	_ = json.Unmarshal(r.Result[0], &code)
	var data map[string]any
	if len(r.Result) > 1 {
		_ = json.Unmarshal(r.Result[1], &data)
	}
	return code, data, nil
}

// login opens an rpcd session as LuCI's login does.
func (c *luci) login(ctx context.Context, user, password string) error {
	c.session = anonSession
	code, data, err := c.call(ctx, "session", "login", map[string]any{"username": user, "password": password})
	if err != nil {
		return fmt.Errorf("session login %s: %w", user, err)
	}
	s, _ := data["ubus_rpc_session"].(string)
	if code != 0 || s == "" {
		return fmt.Errorf("session login %s: status %d, no session", user, code)
	}
	c.session = s
	return nil
}

// rootPassword is the box's root password (its README).
const rootPassword = "surflare-test"

// field reads a string or number field of a decoded reply as text.
func field(m map[string]any, k string) string {
	switch v := m[k].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}
