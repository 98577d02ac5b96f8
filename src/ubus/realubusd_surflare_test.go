package ubus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// surflareListing is what `ubus -v list surflare` prints for the daemon's
// object: every method with its typed arguments in the order they were
// declared (the order a libubus server's policy arrays give).
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

// handlerLog records the arguments the handlers saw.
type handlerLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *handlerLog) add(method string, args Fields) {
	b, _ := args.MarshalJSON()
	l.mu.Lock()
	l.calls = append(l.calls, method+" "+string(b))
	l.mu.Unlock()
}

func (l *handlerLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.calls
	l.calls = nil
	return out
}

// TestAgainstRealUbusd serves the daemon's surflare object (SurflareObject,
// the same table the daemon registers) through a Service behind the real
// ubusd and drives it with the real ubus CLI the way users, LuCI's rpcd,
// the hotplug script and the init script do; then our client against the
// real ubusd; then a ubusd restart.
func TestAgainstRealUbusd(t *testing.T) {
	r := needRealUbus(t)
	log := &handlerLog{}
	slow := make(chan struct{})
	record := func(out Fields, err error) Handler {
		return func(_ context.Context, req *Request) (Fields, error) {
			log.add(req.Method, req.Args)
			return out, err
		}
	}
	obj, err := SurflareObject(SurflareHandlers{
		MethodStatus: record(Fields{{"state", String("up")}, {"node", String("Dallas")}, {"exit", String("US")},
			{"uptime", Int64(5000000000)}, {"loss", Double(0.25)}, {"last_error", Value{Type: TypeUnspec}}}, nil),
		MethodRotate: func(_ context.Context, req *Request) (Fields, error) {
			log.add(req.Method, req.Args)
			if req.User != "root" || req.Group != "root" || req.Caller == 0 {
				t.Errorf("ubusd's caller identity: user %q group %q client %08x, want root/root", req.User, req.Group, req.Caller)
			}
			node, _ := req.String("node")
			return Fields{{"previous", String("Dallas")}, {"node", String(node)}, {"rotated", Bool(true)}}, nil
		},
		MethodCheck:   record(nil, errors.New("engine not running")),
		MethodDiag:    record(Fields{{"diag", Bool(true)}}, nil),
		MethodHotplug: record(nil, nil),
		MethodLog:     record(Fields{{"lines", Array()}}, nil),
		MethodReload: func(ctx context.Context, req *Request) (Fields, error) {
			log.add(req.Method, req.Args)
			select { // slower than the caller's -t 1
			case <-slow:
			case <-ctx.Done():
			}
			return Fields{{"reloaded", Bool(true)}}, nil
		},
		MethodSetCredentials: record(Fields{{"stored", Bool(true)}}, nil),
		MethodReconnect: record(Fields{{"error", String("diag mode is on; turn it off first")}},
			fmt.Errorf("%w: diag mode is on; turn it off first", StatusNotSupported)),
	})
	if err != nil {
		t.Fatal(err)
	}
	svc := &Service{Socket: r.sock, Objects: []*Object{obj}}
	connected := runService(t, svc)
	conn := recvOrFail(t, connected, "registration")

	if got := hideIDs(r.transcript("-v", "list", "surflare")); got != surflareListing+"[exit 0]\n" {
		t.Errorf("ubus -v list surflare:\n%s\nwant:\n%s", got, surflareListing)
	}
	usage := goldenCLI(t, "call_rotate_noarg")
	usage = usage[strings.Index(usage, "Usage:"):strings.LastIndex(usage, "[exit")]
	failed := func(args string, text string) string {
		return "Command failed: ubus call surflare " + args + " (" + text + ")\n"
	}
	for _, tc := range []struct {
		args []string
		want string // transcript
		call string // what the handler saw; "" = not called
	}{
		{[]string{"status"}, "{\n\t\"state\": \"up\",\n\t\"node\": \"Dallas\",\n\t\"exit\": \"US\",\n\t\"uptime\": 5000000000,\n\t\"loss\": 0.250000,\n\t\"last_error\": null\n}\n[exit 0]\n", `status {}`},
		{[]string{"rotate", `{"node":"Chicago"}`}, "{\n\t\"previous\": \"Dallas\",\n\t\"node\": \"Chicago\",\n\t\"rotated\": true\n}\n[exit 0]\n", `rotate {"node":"Chicago"}`},
		{[]string{"rotate"}, "{\n\t\"previous\": \"Dallas\",\n\t\"node\": \"\",\n\t\"rotated\": true\n}\n[exit 0]\n", `rotate {}`},
		{[]string{"rotate", `{"node":5}`}, failed(`rotate {"node":5}`, "Invalid argument") + usage + "[exit 254]\n", ""},
		{[]string{"nosuch"}, failed("nosuch", "Method not found") + "[exit 253]\n", ""},
		{[]string{"probe", `{"node":"Miami"}`}, failed(`probe {"node":"Miami"}`, "Operation not supported") + "[exit 248]\n", ""},
		{[]string{"check"}, failed("check", "Unknown error") + "[exit 247]\n", `check {}`},
		// Types are held exactly, as rpcd holds its objects' calls: the
		// CLI sends 1 as an INT32, not a boolean, and 5000000000 as an
		// INT64, not an INT32; an argument the method does not declare is
		// refused, LuCI's session id excepted.
		{[]string{"diag", `{"enable":1}`}, failed(`diag {"enable":1}`, "Invalid argument") + usage + "[exit 254]\n", ""},
		{[]string{"diag", `{"enable":true}`}, "{\n\t\"diag\": true\n}\n[exit 0]\n", `diag {"enable":true}`},
		{[]string{"log", `{"lines":5}`}, "{\n\t\"lines\": [\n\t\t\n\t]\n}\n[exit 0]\n", `log {"lines":5}`},
		{[]string{"log", `{"lines":5000000000}`}, failed(`log {"lines":5000000000}`, "Invalid argument") + usage + "[exit 254]\n", ""},
		{[]string{"log", `{"lines":2.5}`}, failed(`log {"lines":2.5}`, "Invalid argument") + usage + "[exit 254]\n", ""},
		{[]string{"log", `{"lines":"5"}`}, failed(`log {"lines":"5"}`, "Invalid argument") + usage + "[exit 254]\n", ""},
		{[]string{"rotate", `{"node":"Chicago","nod":"x"}`}, failed(`rotate {"node":"Chicago","nod":"x"}`, "Invalid argument") + usage + "[exit 254]\n", ""},
		{[]string{"rotate", `{"node":"Chicago","ubus_rpc_session":"0123"}`}, "{\n\t\"previous\": \"Dallas\",\n\t\"node\": \"Chicago\",\n\t\"rotated\": true\n}\n[exit 0]\n", `rotate {"node":"Chicago","ubus_rpc_session":"0123"}`},
		{[]string{"diag", `{"enable":false}`}, "{\n\t\"diag\": true\n}\n[exit 0]\n", `diag {"enable":false}`},
		{[]string{"diag"}, failed("diag", "Invalid argument") + usage + "[exit 254]\n", ""},
		{[]string{"hotplug", `{"action":"ifdown","interface":"wan"}`}, "[exit 0]\n", `hotplug {"action":"ifdown","interface":"wan"}`},
		{[]string{"hotplug", `{"action":"ifup","interface":"wan","device":"eth1"}`}, "[exit 0]\n", `hotplug {"action":"ifup","interface":"wan","device":"eth1"}`},
		{[]string{"hotplug", `{"action":"ifup"}`}, failed(`hotplug {"action":"ifup"}`, "Invalid argument") + usage + "[exit 254]\n", ""},
		{[]string{"set_credentials", `{"username":"u@example.org","password":"p w\"1"}`}, "{\n\t\"stored\": true\n}\n[exit 0]\n", `set_credentials {"username":"u@example.org","password":"p w\"1"}`},
		{[]string{"token", `{"x":[1,{"y":null}]}`}, failed(`token {"x":[1,{"y":null}]}`, "Invalid argument") + usage + "[exit 254]\n", ""},
		{[]string{"token"}, failed(`token`, "Operation not supported") + "[exit 248]\n", ""},
	} {
		got := r.transcript(append([]string{"call", "surflare"}, tc.args...)...)
		if got != tc.want {
			t.Errorf("ubus call surflare %s:\n%s\nwant:\n%s", strings.Join(tc.args, " "), got, tc.want)
		}
		calls := log.take()
		if tc.call == "" && len(calls) > 0 || tc.call != "" && (len(calls) != 1 || calls[0] != tc.call) {
			t.Errorf("ubus call surflare %s: handler saw %q, want %q", strings.Join(tc.args, " "), calls, tc.call)
		}
	}

	// LuCI polling, the hotplug script and a user at once: many callers in
	// parallel all get their own answer.
	var wg sync.WaitGroup
	results := make(chan string, 32)
	for i := range cap(results) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := fmt.Sprintf("N%02d", i)
			results <- r.transcript("call", "surflare", "rotate", `{"node":"`+node+`"}`) + node
		}()
	}
	wg.Wait()
	close(results)
	for res := range results {
		node := res[len(res)-3:]
		if want := "\t\"node\": \"" + node + "\",\n"; !strings.Contains(res, want) || !strings.Contains(res, "[exit 0]") {
			t.Errorf("parallel rotate %s: %q", node, res)
		}
	}
	log.take()

	// A refusal with a reason: the CLI prints the reason (DATA), then the
	// status, as it does for a libubus handler that replies and fails.
	stdout, stderr, code := r.runSplit("call", "surflare", "reconnect")
	if want := "{\n\t\"error\": \"diag mode is on; turn it off first\"\n}\n"; stdout != want || stderr != failed("reconnect", "Operation not supported") || code != 248 {
		t.Errorf("reconnect refused: stdout %q stderr %q exit %d, want %q, %q, 248", stdout, stderr, code, want, failed("reconnect", "Operation not supported"))
	}
	log.take()

	// A handler slower than the caller: the CLI gives up with TIMEOUT,
	// our late reply is dropped by ubusd, and the next call is served.
	if got, want := r.transcript("-t", "1", "call", "surflare", "reload"), failed("reload", "Request timed out")+"[exit 249]\n"; got != want {
		t.Errorf("slow reload: %q, want %q", got, want)
	}
	close(slow)
	if got := r.transcript("call", "surflare", "reload"); got != "{\n\t\"reloaded\": true\n}\n[exit 0]\n" {
		t.Errorf("reload after a timed-out one: %q", got)
	}
	log.take()

	// Events: surflare.state reaches `ubus listen` with a pattern, a
	// prefix pattern and no pattern at all.
	state := Fields{{"state", String("RECONNECTING")}, {"from", String("HEALTHY")}, {"reason", String("probe failed")}, {"node", String("Dallas")}}
	line := `{ "surflare.state": {"state":"RECONNECTING","from":"HEALTHY","reason":"probe failed","node":"Dallas"} }`
	checkListen(t, r, svc, EventState, []string{EventState}, state, line)
	checkListen(t, r, svc, EventState, []string{"surflare.*"}, state, line)

	// Subscribers: ACTIVE follows them; Notify reaches `ubus subscribe`.
	sub := r.background("-t", "1", "subscribe", "surflare")
	waitFor(t, "NOTIFY active=1", func() bool { return conn.HasSubscribers(obj) })
	if err := svc.Notify(obj, "state", state); err != nil {
		t.Fatal(err)
	}
	if out, code := sub.wait(t); out != `{ "state": {"state":"RECONNECTING","from":"HEALTHY","reason":"probe failed","node":"Dallas"} }`+"\n" || code != 0 {
		t.Errorf("subscriber: %q, exit %d", out, code)
	}
	waitFor(t, "NOTIFY active=0", func() bool { return !conn.HasSubscribers(obj) })

	checkClient(t, r, svc)

	// ubusd restarts (procd respawn): the Service registers again by
	// itself; `ubus wait_for surflare` (what init scripts use) returns.
	r.stop()
	r.start()
	recvOrFail(t, connected, "re-registration after the ubusd restart")
	if got := r.transcript("-t", "5", "wait_for", "surflare"); got != "[exit 0]\n" {
		t.Errorf("wait_for after restart: %q", got)
	}
	if got := r.transcript("list"); got != "surflare\n[exit 0]\n" {
		t.Errorf("ubus list after restart: %q", got)
	}
	if got := r.transcript("call", "surflare", "rotate", `{"node":"Atlanta"}`); !strings.Contains(got, `"node": "Atlanta"`) {
		t.Errorf("rotate after restart: %q", got)
	}
	// ubusd stopped for a while (longer than one backoff step), then back.
	r.stop()
	time.Sleep(300 * time.Millisecond) // real outage: the Service must retry more than once
	r.start()
	recvOrFail(t, connected, "re-registration after an outage")
	if got := r.transcript("list", "surflare"); got != "surflare\n[exit 0]\n" {
		t.Errorf("ubus list after an outage: %q", got)
	}
}

// checkClient drives our client against the real ubusd: Lookup and Call on
// the Service's object, Listen for the real CLI's `ubus send`, Subscribe
// to a notification.
func checkClient(t *testing.T, r *realUbus, svc *Service) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, r.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := c.Lookup(ctx, ObjectName)
	if err != nil || len(info) != 1 || len(info[0].Methods()) != len(SurflareMethods()) {
		t.Fatalf("lookup: %+v, %v", info, err)
	}
	if got := info[0].Methods()[MethodHotplug]; fmt.Sprint(got) != "map[action:string device:string interface:string]" {
		t.Errorf("hotplug signature through Lookup: %v", got)
	}
	if _, err := c.Lookup(ctx, "nosuch"); !errors.Is(err, StatusNotFound) {
		t.Errorf("lookup nosuch: %v, want not found", err)
	}
	got, err := c.Call(ctx, ObjectName, MethodRotate, map[string]any{"node": "Chicago"})
	if err != nil || got["node"] != "Chicago" || got["rotated"] != true {
		t.Fatalf("rotate: %v, %v", got, err)
	}
	if _, err := c.Call(ctx, ObjectName, MethodRotate, map[string]any{"node": 5}); !errors.Is(err, StatusInvalidArgument) {
		t.Errorf("rotate with an int: %v, want invalid argument", err)
	}
	if _, err := c.Call(ctx, ObjectName, "nosuch", nil); !errors.Is(err, StatusMethodNotFound) {
		t.Errorf("unknown method: %v, want method not found", err)
	}
	if _, err := c.Call(ctx, "nosuch", "status", nil); !errors.Is(err, StatusNotFound) {
		t.Errorf("unknown object: %v, want not found", err)
	}
	// The real CLI sends, we listen.
	events := make(chan Event, 8)
	if err := c.Listen(ctx, "surflare.*", func(e Event) { events <- e }); err != nil {
		t.Fatal(err)
	}
	if out := r.transcript("send", "surflare.state", `{"state":"up","count":3}`); out != "[exit 0]\n" {
		t.Errorf("ubus send: %q", out)
	}
	e := recvOrFail(t, events, "event from ubus send")
	if b, _ := e.Data.MarshalJSON(); e.Name != EventState || string(b) != `{"state":"up","count":3}` {
		t.Errorf("event %s %s", e.Name, b)
	}
	// We subscribe to our own object through ubusd and get its notify.
	notes := make(chan Notification, 8)
	if err := c.Subscribe(ctx, ObjectName, func(n Notification) { notes <- n }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "our subscription to be active", func() bool { return svc.Conn().HasSubscribers(svc.Objects[0]) })
	if err := svc.Notify(svc.Objects[0], "hello", Fields{{"n", Int32(1)}}); err != nil {
		t.Fatal(err)
	}
	if n := recvOrFail(t, notes, "notification"); n.Type != "hello" {
		t.Errorf("notification %+v", n)
	}
}
