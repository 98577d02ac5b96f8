package ubus

import (
	"fmt"
	"sort"
	"strings"
)

// The watchdog's own ubus interface, defined here once so the signature
// ubusd announces, the argument checks and the daemon's handlers cannot
// drift apart. LuCI's rpcd ACL and the hotplug script call these names.
const (
	// ObjectName is the object the daemon registers: `ubus call surflare …`.
	ObjectName = "surflare"
	// EventState is sent on every state transition: `ubus listen surflare.state`.
	EventState = "surflare.state"
)

// Method names of the surflare object.
const (
	MethodStatus         = "status"          // current state as JSON
	MethodCheck          = "check"           // run a health check now
	MethodRotate         = "rotate"          // rotate to {node}, or to the next node
	MethodReconnect      = "reconnect"       // reconnect on the current node
	MethodDiag           = "diag"            // {enable}: on-demand diagnostics
	MethodNodes          = "nodes"           // nodes with their health
	MethodProbe          = "probe"           // probe {node}, or every node
	MethodReload         = "reload"          // reload /etc/config/surflare
	MethodLog            = "log"             // last {lines} of the watchdog log
	MethodHistory        = "history"         // health strip over {span} seconds in {buckets}
	MethodHotplug        = "hotplug"         // {action, interface, device} from hotplug.d/iface
	MethodToken          = "token"           // a short-lived read-only token for the live view
	MethodTokenWrite     = "token_write"     // a short-lived token that may also act (web API POSTs)
	MethodSetCredentials = "set_credentials" // {username, password} for the vendor login
	MethodEvents         = "events"          // {since, wait}: events after since, a long poll (EventLog)
)

// Who may call what. rpcd's ACL (luci-app-surflare's acl.d) grants per
// method, not per argument, so a token that may act needs a method of its
// own that only the write ACL lists: token_write beside token.
var (
	// SurflareReadMethods change nothing and reveal no secret: LuCI's read
	// ACL grants exactly these. Every other method but the root-only ones
	// is for the write ACL.
	SurflareReadMethods = []string{MethodStatus, MethodNodes, MethodLog, MethodHistory, MethodToken, MethodEvents}
	// SurflareRootMethods are called by root's own scripts (netifd's
	// hotplug) and are in no ACL.
	SurflareRootMethods = []string{MethodHotplug}
)

// SurflareMethods returns the surflare object's methods with their typed
// policies and required arguments, without handlers.
func SurflareMethods() []Method {
	str, b, i32 := TypeString, TypeBool, TypeInt32
	return []Method{
		{Name: MethodStatus},
		{Name: MethodCheck},
		{Name: MethodRotate, Policy: map[string]BlobmsgType{"node": str}},
		{Name: MethodReconnect},
		{Name: MethodDiag, Policy: map[string]BlobmsgType{"enable": b}, Required: []string{"enable"}},
		{Name: MethodNodes},
		{Name: MethodProbe, Policy: map[string]BlobmsgType{"node": str}},
		{Name: MethodReload},
		{Name: MethodLog, Policy: map[string]BlobmsgType{"lines": i32}},
		{Name: MethodHistory, Policy: map[string]BlobmsgType{"span": i32, "buckets": i32}},
		{Name: MethodHotplug, Policy: map[string]BlobmsgType{"action": str, "interface": str, "device": str},
			Required: []string{"action", "interface"}},
		{Name: MethodToken},
		{Name: MethodTokenWrite},
		{Name: MethodSetCredentials, Policy: map[string]BlobmsgType{"username": str, "password": str},
			Required: []string{"username", "password"}},
		{Name: MethodEvents, Policy: map[string]BlobmsgType{"since": i32, "wait": i32}},
	}
}

// SurflareHandlers maps method names (the Method* constants) to handlers.
// A method without a handler is still announced and answers NOT_SUPPORTED.
type SurflareHandlers map[string]Handler

// surflareEventLog is how many notifications the events method keeps.
const surflareEventLog = 200

// SurflareObject builds the surflare object around the daemon's handlers.
// A handler for a name the object does not have is a wiring bug and an
// error. Unless h serves events itself, the object keeps an EventLog of the
// notifications a Service sends for it (Notify, Publish) and serves events
// from it: LuCI's live view then needs nothing else from the daemon.
func SurflareObject(h SurflareHandlers) (*Object, error) {
	obj := &Object{Name: ObjectName, Methods: SurflareMethods()}
	if h[MethodEvents] == nil {
		obj.events = NewEventLog(surflareEventLog)
		obj.method(MethodEvents).Handler = obj.events.Handler()
	}
	var unknown []string
	for name, fn := range h {
		m := obj.method(name)
		if m == nil {
			unknown = append(unknown, name)
			continue
		}
		m.Handler = fn
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("surflare ubus object has no method %s", strings.Join(unknown, ", "))
	}
	return obj, nil
}
