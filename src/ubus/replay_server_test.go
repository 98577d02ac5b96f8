package ubus

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// testServer re-creates the fixtures' libubus test server ("surflare" with
// status, rotate, fail, announce) on our object server.
type testServer struct {
	obj  *Object
	conn *Conn
	mu   sync.Mutex
	reqs []*Request
}

func newTestServer() *testServer {
	s := &testServer{}
	record := func(h Handler) Handler {
		return func(ctx context.Context, r *Request) (Fields, error) {
			s.mu.Lock()
			s.reqs = append(s.reqs, r)
			s.mu.Unlock()
			return h(ctx, r)
		}
	}
	s.obj = &Object{Name: "surflare", Methods: []Method{
		{Name: "status", Handler: record(func(context.Context, *Request) (Fields, error) {
			return Fields{
				{"state", String("up")}, {"node", String("Paris")}, {"uptime", Int32(42)},
				{"healthy", Bool(true)}, {"peers", Array(String("Dallas"), String("Tokyo"))},
			}, nil
		})},
		{Name: "rotate", Policy: map[string]BlobmsgType{"node": TypeString}, Required: []string{"node"},
			Handler: record(func(_ context.Context, r *Request) (Fields, error) {
				node, _ := r.String("node")
				return Fields{{"previous", String("Paris")}, {"node", String(node)}, {"rotated", Bool(true)}}, nil
			})},
		{Name: "fail", Handler: record(func(context.Context, *Request) (Fields, error) {
			return nil, StatusNotSupported
		})},
		{Name: "announce", Policy: map[string]BlobmsgType{"message": TypeString},
			Handler: record(func(_ context.Context, r *Request) (Fields, error) {
				return nil, s.conn.Notify(s.obj, "announce", r.Args)
			})},
	}}
	return s
}

func (s *testServer) calls() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.reqs...)
}

// serveScenario registers the test object, lets the fake ubusd play the
// whole trace (invokes included), then checks which handlers ran.
func serveScenario(check func(env *replayEnv, calls []*Request) error) func(context.Context, *replayEnv, *Conn) error {
	return func(ctx context.Context, env *replayEnv, c *Conn) error {
		s := newTestServer()
		s.conn = c
		if err := c.AddObject(ctx, s.obj); err != nil {
			return err
		}
		if err := waitScript(ctx, env); err != nil {
			return err
		}
		return check(env, s.calls())
	}
}

func wantCalls(method string, n int) func(*replayEnv, []*Request) error {
	return func(_ *replayEnv, calls []*Request) error {
		if len(calls) != n || (n > 0 && calls[0].Method != method) {
			return fmt.Errorf("handlers ran %d times (%v), want %s %d times", len(calls), calls, method, n)
		}
		for _, r := range calls {
			if r.User != "root" || r.Group != "root" {
				return fmt.Errorf("caller %s:%s, want root:root from ubusd", r.User, r.Group)
			}
		}
		return nil
	}
}

// serverScenarios cover register.trace and every *.server.trace.
var serverScenarios = map[string]func(context.Context, *replayEnv, *Conn) error{
	"register.trace":                   serveScenario(wantCalls("", 0)),
	"list.server.trace":                serveScenario(wantCalls("", 0)),
	"list_verbose.server.trace":        serveScenario(wantCalls("", 0)),
	"list_path.server.trace":           serveScenario(wantCalls("", 0)),
	"list_missing.server.trace":        serveScenario(wantCalls("", 0)),
	"call_missing_object.server.trace": serveScenario(wantCalls("", 0)),
	"call_bad_json.server.trace":       serveScenario(wantCalls("", 0)),
	"call_status.server.trace":         serveScenario(wantCalls("status", 1)),
	"call_fail.server.trace":           serveScenario(wantCalls("fail", 1)),
	// unknown method: answered METHOD_NOT_FOUND without running a handler
	"call_missing_method.server.trace": serveScenario(wantCalls("", 0)),
	// missing required argument: INVALID_ARGUMENT without running the handler
	"call_rotate_noarg.server.trace": serveScenario(wantCalls("", 0)),
	"call_rotate.server.trace": serveScenario(func(env *replayEnv, calls []*Request) error {
		if err := wantCalls("rotate", 1)(env, calls); err != nil {
			return err
		}
		if node, _ := calls[0].String("node"); node != "Dallas" {
			return fmt.Errorf("rotate got node %q, want Dallas", node)
		}
		if calls[0].Caller != env.id(0x37a338f6) {
			return fmt.Errorf("caller id %08x, want the CLI's %08x", calls[0].Caller, env.id(0x37a338f6))
		}
		return nil
	}),
	// subscriber appears (NOTIFY ACTIVE=1), announce → our NOTIFY, then STATUS
	"subscribe_notify.server.trace": serveScenario(wantCalls("announce", 1)),
}

func TestReplayServerTraces(t *testing.T) {
	for name, sc := range serverScenarios {
		t.Run(name, func(t *testing.T) { replay(t, name, sc) })
	}
}
