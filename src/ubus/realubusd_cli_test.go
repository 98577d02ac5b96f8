package ubus

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// objectIDs hides the random object ids in `ubus -v list` output.
var objectIDs = regexp.MustCompile(`@[0-9a-f]{8}\n`)

func hideIDs(s string) string { return objectIDs.ReplaceAllString(s, "@ID\n") }

// TestRealUbusCLIMatchesFixtures serves the fixtures' test object (the one
// their libubus test server had) from our object server behind the real
// ubusd, and runs the same ubus CLI commands: every transcript must be the
// one the libubus server produced, byte for byte, exit status included.
func TestRealUbusCLIMatchesFixtures(t *testing.T) {
	r := needRealUbus(t)
	fixtureDir(t)
	if got, want := r.transcript("list"), goldenCLI(t, "list_empty"); got != want {
		t.Errorf("list on an empty ubusd:\n%s\nwant:\n%s", got, want)
	}

	srv := newTestServer()
	svc := &Service{Socket: r.sock, Objects: []*Object{srv.obj}}
	// announce notifies through the Service: the connection is the
	// Service's, not the fixture server's.
	srv.obj.Methods[3].Handler = func(_ context.Context, req *Request) (Fields, error) {
		return nil, svc.Notify(srv.obj, "announce", req.Args)
	}
	conn := recvOrFail(t, runService(t, svc), "registration")

	for _, tc := range []struct {
		fixture string
		args    []string
	}{
		{"list", []string{"list"}},
		{"list_verbose", []string{"-v", "list"}},
		{"list_path", []string{"-v", "list", "surflare"}},
		{"list_missing", []string{"list", "nosuchobject"}},
		{"call_status", []string{"call", "surflare", "status"}},
		{"call_rotate", []string{"call", "surflare", "rotate", `{"node":"Dallas"}`}},
		{"call_rotate_noarg", []string{"call", "surflare", "rotate"}},
		{"call_fail", []string{"call", "surflare", "fail"}},
		{"call_missing_method", []string{"call", "surflare", "nosuchmethod"}},
		{"call_missing_object", []string{"call", "nosuchobject", "status"}},
		{"call_bad_json", []string{"call", "surflare", "rotate", `{node:`}},
	} {
		got, want := hideIDs(r.transcript(tc.args...)), hideIDs(goldenCLI(t, tc.fixture))
		if got != want {
			t.Errorf("%s: ubus %s printed\n%s\nthe libubus server's transcript is\n%s", tc.fixture, strings.Join(tc.args, " "), got, want)
		}
	}

	// subscribe_notify: ubusd tells us when the subscriber arrives (ACTIVE
	// 1) and leaves (ACTIVE 0); announce reaches it as a notification.
	sub := r.background("-t", "1", "subscribe", "surflare")
	waitFor(t, "ubusd's NOTIFY active=1 for the subscriber", func() bool { return conn.HasSubscribers(srv.obj) })
	if got, want := r.transcript("call", "surflare", "announce", `{"message":"rotating soon"}`), "[exit 0]\n"; got != want {
		t.Errorf("announce: %q, want %q", got, want)
	}
	out, code := sub.wait(t)
	if got, want := out+exitLine("subscribe", code), goldenCLI(t, "subscribe_notify")[len("[exit 0]\n"):]; got != want {
		t.Errorf("subscriber printed\n%s\nwant\n%s", got, want)
	}
	waitFor(t, "ubusd's NOTIFY active=0 after the subscriber left", func() bool { return !conn.HasSubscribers(srv.obj) })

	// send_listen: our SendEvent reaches `ubus listen` as the CLI's own
	// `ubus send` did; an event outside the pattern does not.
	checkListen(t, r, svc, "surflare.state", []string{"surflare.state"},
		Fields{{"state", String("up")}, {"node", String("Dallas")}, {"count", Int32(3)}},
		strings.TrimSuffix(strings.Split(goldenCLI(t, "send_listen"), "\n")[2], "\n"))
}

// checkListen runs `ubus listen args...` and sends event name with data
// (and other.event in between) until the listener has printed one line;
// every line it prints must be want, and it must exit 0.
func checkListen(t *testing.T, r *realUbus, svc *Service, name string, args []string, data Fields, want string) {
	t.Helper()
	l := r.background(append([]string{"-t", "1", "listen"}, args...)...)
	// The listener's registration is invisible from outside, so send until
	// it shows the event.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for seen := false; !seen; {
		if err := svc.SendEvent(ctx, "other.event", Fields{{"ignored", Bool(true)}}); err != nil {
			t.Fatal(err)
		}
		if err := svc.SendEvent(ctx, name, data); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.lines:
			seen = true
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("ubus listen %v never printed %s", args, name)
		}
	}
	out, code := l.wait(t)
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line != want {
			t.Errorf("ubus listen %v printed %q, want only %q", args, line, want)
		}
	}
	if code != 0 {
		t.Errorf("ubus listen %v: exit %d", args, code)
	}
}
