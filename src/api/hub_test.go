package api

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

func TestHubDropsSlowClientAndKeepsFastOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		h := newHub(10)
		go h.run(ctx)
		synctest.Wait()

		slow := &client{send: make(chan []byte, clientBuffer)} // never read
		fast := &client{send: make(chan []byte, clientBuffer)}
		if !h.join(ctx, slow) || !h.join(ctx, fast) {
			t.Fatal("join failed")
		}
		got := 0
		go func() {
			for range fast.send {
				got++
			}
		}()
		const total = 3 * clientBuffer
		for i := range total {
			h.publish(KindLog, fmt.Appendf(nil, `{"n":%d}`, i), true)
			if i%8 == 7 {
				synctest.Wait() // let the hub and the fast reader catch up
			}
		}
		synctest.Wait()
		if got != total {
			t.Errorf("fast client got %d of %d frames", got, total)
		}
		n := 0
		for range slow.send { // closed by the hub, or this would block forever
			n++
		}
		if n != clientBuffer {
			t.Errorf("slow client had %d frames queued, want %d", n, clientBuffer)
		}
		if d := h.droppedClients.Load(); d != 1 {
			t.Errorf("dropped clients = %d, want 1", d)
		}
		if c := h.nClients.Load(); c != 1 {
			t.Errorf("clients = %d, want 1", c)
		}
		if r := h.recent(0); len(r) != 10 || string(r[9]) != fmt.Sprintf(`{"n":%d}`, total-1) || string(r[0]) != fmt.Sprintf(`{"n":%d}`, total-10) {
			t.Errorf("history: %d frames, first %s last %s", len(r), r[0], r[len(r)-1])
		}
		cancel()
		synctest.Wait()
		if _, ok := <-fast.send; ok {
			t.Error("fast client's channel still open after the hub stopped")
		}
	})
}

func TestPublishNeverBlocksWhenHubIsBehind(t *testing.T) {
	h := newHub(5)
	h.running.Store(true) // a hub that never drains
	done := make(chan struct{})
	go func() {
		for range 10 * hubBacklog {
			h.publish(KindHealth, []byte(`{}`), true)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("publish blocked on a hub that does not drain")
	}
	if d := h.droppedEvents.Load(); d != 9*hubBacklog {
		t.Errorf("dropped %d events, want %d", d, 9*hubBacklog)
	}
	if n := len(h.recent(0)); n != 5 {
		t.Errorf("history kept %d, want 5", n)
	}
}

func TestHubRefusesClientsBeyondTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		h := newHub(0)
		go h.run(ctx)
		synctest.Wait()
		for range maxClients {
			h.join(ctx, &client{send: make(chan []byte, 1)})
		}
		extra := &client{send: make(chan []byte, 1)}
		h.join(ctx, extra)
		synctest.Wait()
		if _, ok := <-extra.send; ok {
			t.Fatal("client beyond the limit was kept")
		}
		if n := h.nClients.Load(); n != maxClients {
			t.Errorf("clients = %d, want %d", n, maxClients)
		}
	})
}
