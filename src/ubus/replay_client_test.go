package ubus

import (
	"context"
	"fmt"
	"reflect"
	"testing"
)

// signatureOfTestServer is what the fixtures' libubus test server announced.
var signatureOfTestServer = map[string]map[string]BlobmsgType{
	"status": {}, "rotate": {"node": TypeString}, "fail": {}, "announce": {"message": TypeString},
}

// lookupSurflare checks a lookup that finds the test server's object.
func lookupSurflare(path string, objID uint32) func(context.Context, *replayEnv, *Conn) error {
	return func(ctx context.Context, env *replayEnv, c *Conn) error {
		objs, err := c.Lookup(ctx, path)
		if err != nil {
			return err
		}
		if len(objs) != 1 {
			return fmt.Errorf("got %d objects, want 1", len(objs))
		}
		o := objs[0]
		if o.Path != "surflare" || o.ID != env.id(objID) {
			return fmt.Errorf("got %q @%08x, want \"surflare\" @%08x", o.Path, o.ID, env.id(objID))
		}
		if got := o.Methods(); !reflect.DeepEqual(got, signatureOfTestServer) {
			return fmt.Errorf("signature %v, want %v", got, signatureOfTestServer)
		}
		return nil
	}
}

// receive waits for one delivery from a listener or subscriber callback.
func receive[T any](ctx context.Context, ch <-chan T) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("nothing delivered: %w", ctx.Err())
	}
}

// clientScenarios drive our client through what the CLI did in each trace.
var clientScenarios = map[string]func(context.Context, *replayEnv, *Conn) error{
	"list.trace":         lookupSurflare("", 0x624e5ed8),
	"list_verbose.trace": lookupSurflare("", 0xdd5dc253),
	"list_path.trace":    lookupSurflare("surflare", 0xf34be38c),
	"list_missing.trace": func(ctx context.Context, _ *replayEnv, c *Conn) error {
		_, err := c.Lookup(ctx, "nosuchobject")
		return wantStatus(err, StatusNotFound)
	},
	"list_empty.trace": func(ctx context.Context, _ *replayEnv, c *Conn) error {
		objs, err := c.Lookup(ctx, "")
		if err != nil || len(objs) != 0 {
			return fmt.Errorf("got %v, %v; want no objects and no error", objs, err)
		}
		return nil
	},
	"call_status.trace": func(ctx context.Context, _ *replayEnv, c *Conn) error {
		got, err := c.Call(ctx, "surflare", "status", nil)
		if err != nil {
			return err
		}
		want := map[string]any{"state": "up", "node": "Paris", "uptime": int32(42), "healthy": true,
			"peers": []any{"Dallas", "Tokyo"}}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("got %#v, want %#v", got, want)
		}
		return nil
	},
	"call_rotate.trace": func(ctx context.Context, _ *replayEnv, c *Conn) error {
		got, err := c.Call(ctx, "surflare", "rotate", map[string]any{"node": "Dallas"})
		if err != nil {
			return err
		}
		want := map[string]any{"previous": "Paris", "node": "Dallas", "rotated": true}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("got %#v, want %#v", got, want)
		}
		return nil
	},
	"call_rotate_noarg.trace": func(ctx context.Context, _ *replayEnv, c *Conn) error {
		_, err := c.Call(ctx, "surflare", "rotate", nil)
		return wantStatus(err, StatusInvalidArgument)
	},
	"call_fail.trace": func(ctx context.Context, _ *replayEnv, c *Conn) error {
		_, err := c.CallJSON(ctx, "surflare", "fail", "")
		return wantStatus(err, StatusNotSupported)
	},
	"call_missing_method.trace": func(ctx context.Context, _ *replayEnv, c *Conn) error {
		_, err := c.CallJSON(ctx, "surflare", "nosuchmethod", "")
		return wantStatus(err, StatusMethodNotFound)
	},
	"call_missing_object.trace": func(ctx context.Context, _ *replayEnv, c *Conn) error {
		_, err := c.CallJSON(ctx, "nosuchobject", "status", "")
		return wantStatus(err, StatusNotFound)
	},
	"call_bad_json.trace": func(ctx context.Context, _ *replayEnv, c *Conn) error {
		_, err := c.CallJSON(ctx, "surflare", "rotate", "{node:")
		return wantStatus(err, StatusParseError)
	},
	"subscribe_notify.trace": func(ctx context.Context, _ *replayEnv, c *Conn) error {
		out, err := c.CallJSON(ctx, "surflare", "announce", `{"message":"rotating soon"}`)
		if err != nil || out != nil {
			return fmt.Errorf("got %v, %v; want no data and no error", out, err)
		}
		return nil
	},
	"send_listen.trace": func(ctx context.Context, _ *replayEnv, c *Conn) error {
		data, err := ParseJSON([]byte(`{"state":"up","node":"Dallas","count":3}`))
		if err != nil {
			return err
		}
		return c.SendEvent(ctx, "surflare.state", data)
	},
	"send_listen.sender2.trace": func(ctx context.Context, _ *replayEnv, c *Conn) error {
		return c.SendEvent(ctx, "other.event", Fields{{Name: "ignored", Value: Bool(true)}})
	},
	"send_listen_all.trace": func(ctx context.Context, _ *replayEnv, c *Conn) error {
		return c.SendEvent(ctx, "surflare.state", Fields{{Name: "state", Value: String("down")}})
	},
	"send_listen.listener.trace":     listenFor("surflare.state", `{"state":"up","node":"Dallas","count":3}`),
	"send_listen_all.listener.trace": listenFor("*", `{"state":"down"}`),
	"subscribe_notify.subscriber.trace": func(ctx context.Context, _ *replayEnv, c *Conn) error {
		got := make(chan Notification, 1)
		if err := c.Subscribe(ctx, "surflare", func(n Notification) { got <- n }); err != nil {
			return err
		}
		n, err := receive(ctx, got)
		if err != nil {
			return err
		}
		if n.Object != "surflare" || n.Type != "announce" {
			return fmt.Errorf("got notification %q from %q, want announce from surflare", n.Type, n.Object)
		}
		return wantJSON("notification", n.Data, `{"message":"rotating soon"}`)
	},
}

func listenFor(pattern, want string) func(context.Context, *replayEnv, *Conn) error {
	return func(ctx context.Context, _ *replayEnv, c *Conn) error {
		got := make(chan Event, 1)
		if err := c.Listen(ctx, pattern, func(e Event) { got <- e }); err != nil {
			return err
		}
		e, err := receive(ctx, got)
		if err != nil {
			return err
		}
		if e.Name != "surflare.state" {
			return fmt.Errorf("event %q, want surflare.state", e.Name)
		}
		return wantJSON("event data", e.Data, want)
	}
}

func TestReplayClientTraces(t *testing.T) {
	for name, sc := range clientScenarios {
		t.Run(name, func(t *testing.T) { replay(t, name, sc) })
	}
}

// Every golden trace has a replay: a new fixture without one fails here.
func TestEveryTraceIsReplayed(t *testing.T) {
	for _, name := range allTraces(t) {
		_, client := clientScenarios[name]
		_, server := serverScenarios[name]
		if !client && !server {
			t.Errorf("%s has no replay scenario", name)
		}
	}
}

// The substitution really changes the ids, so an echo test can fail.
func TestReplaySubstitutesIDs(t *testing.T) {
	env := prepareReplay(t, "call_status.trace")
	orig := loadTrace(t, "call_status.trace")
	if len(env.ids) < 3 {
		t.Fatalf("found %d ids in call_status, want client, object and type ids", len(env.ids))
	}
	for old, n := range env.ids {
		if old == n {
			t.Errorf("id %08x not replaced", old)
		}
	}
	for i := range orig {
		if i > 0 && string(orig[i].msg) == string(env.script[i].msg) && len(topLevelU32s(orig[i].msg)) > 0 {
			t.Errorf("message %d carries ids but was not rewritten", i)
		}
	}
}
