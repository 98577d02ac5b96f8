package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/api"
	"surflare-watchdog/src/surflare"
	"surflare-watchdog/src/ubus"
	"surflare-watchdog/src/watchdog"
)

// untouchable stands in for the vendor, the firewall and the prober: any
// call panics (a nil embedded interface), so a refused rotation that
// reached any of them fails the test.
type untouchable struct {
	watchdog.Vendor
	watchdog.Firewall
	watchdog.Prober
}

// The ubus and web API rotate paths go through the engine's node check:
// an unknown name is INVALID_ARGUMENT / 400 with did-you-mean, decided
// before the engine's loop (not running here) is even asked.
func TestRotateRefusesUnknownNodesOnUbusAndAPI(t *testing.T) {
	var u untouchable
	nodes := surflare.NewNodeCache(func(context.Context) ([]string, error) {
		return []string{"Dallas", "Los Angeles", "Chicago", "Tokyo"}, nil
	}, nil)
	w, err := watchdog.New(watchdog.DefaultSettings(), watchdog.Deps{Vendor: u, Firewall: u, Prober: u, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{w: w}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()

	args, _ := ubus.ParseJSON([]byte(`{"node":"Chicgo"}`))
	f, err := d.ubusHandlers(api.NewTokens(nil))[ubus.MethodRotate](ctx, &ubus.Request{Args: args})
	var st ubus.Status
	if !errors.As(err, &st) || st != ubus.StatusInvalidArgument || !strings.Contains(f.Map()["error"].(string), `did you mean "Chicago"?`) {
		t.Errorf("ubus rotate Chicgo: %v, %v", f.Map(), err)
	}
	err = (apiBackend{d}).Rotate(ctx, "Narnia")
	if !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), `unknown node "Narnia"; known nodes: Dallas, Los Angeles, Chicago, Tokyo,`) {
		t.Errorf("API rotate Narnia: %v", err)
	}
	// A known name gets past the check to the engine, which is not running
	// and does not take it before the deadline.
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	if err := (apiBackend{d}).Rotate(short, "tokyo"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("API rotate tokyo: %v, want the engine's (not a refusal of the name)", err)
	}
}
