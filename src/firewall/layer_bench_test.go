package firewall

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"
)

// BenchmarkRouteLayer is what the routing layer costs a packet through the
// router: UDP round trips to a direct (cn_direct) host behind the WAN, from
// a LAN host (forwarded both ways: permit_in, then the layer's rules) and
// from the router itself (held, released by permit_out, re-routed), with
// the layer off and on. The two alternate in rounds inside one topology, so
// the machine's load falls on both alike; it reports the medians over
// the rounds of each side's round trip and of their ratio (on/off). Run: go test -run '^$' -bench RouteLayer.
func BenchmarkRouteLayer(b *testing.B) {
	for _, path := range []struct {
		name string
		from func(*topo) *testNS
	}{
		{"lan", func(tp *topo) *testNS { return tp.lan }},
		{"router", func(tp *topo) *testNS { return tp.router }},
	} {
		b.Run(path.name, func(b *testing.B) {
			ctx := context.Background()
			tp := newTopoPrefix(b, flushNSPrefix)
			udpEcho(b, tp.inet, domesticWeb+":7")
			var c net.Conn
			path.from(tp).run(func() {
				var err error
				if c, err = net.Dial("udp4", domesticWeb+":7"); err != nil {
					b.Error(err)
				}
			})
			if c == nil {
				b.FailNow()
			}
			defer c.Close()
			fw := newFW(tp.router)
			s := labSpec()
			buf := make([]byte, 64)
			rtts := func(n int) time.Duration {
				c.SetDeadline(time.Now().Add(10 * time.Second))
				start := time.Now()
				for range n {
					if _, err := c.Write(buf[:32]); err != nil {
						b.Fatal(err)
					}
					if _, err := c.Read(buf); err != nil {
						b.Fatalf("round trip lost: %v", err)
					}
				}
				return time.Since(start)
			}
			// Many short rounds, each off then on, and the medians of the
			// rounds: a burst of load from the machine's other users then
			// spoils a round or two, not the figure.
			const rounds = 20
			per := b.N/(2*rounds) + 1
			var off, on, ratio []float64
			b.ResetTimer()
			for range rounds {
				var took [2]float64
				for i, layer := range []bool{false, true} {
					b.StopTimer()
					s.RouteLayer = layer
					if _, err := fw.Apply(ctx, s); err != nil {
						b.Fatal(err)
					}
					rtts(10) // warm: neighbours, conntrack
					b.StartTimer()
					took[i] = float64(rtts(per).Nanoseconds()) / float64(per)
				}
				off, on, ratio = append(off, took[0]), append(on, took[1]), append(ratio, took[1]/took[0])
			}
			b.StopTimer()
			b.ReportMetric(median(off), "ns/rtt-off")
			b.ReportMetric(median(on), "ns/rtt-on")
			b.ReportMetric(median(ratio), "on/off")
		})
	}
}

// udpEcho answers every datagram to addr in ns with itself.
func udpEcho(t testing.TB, ns *testNS, addr string) {
	t.Helper()
	var pc net.PacketConn
	ns.run(func() {
		var err error
		if pc, err = net.ListenPacket("udp4", addr); err != nil {
			t.Error(err)
		}
	})
	if pc == nil {
		t.FailNow()
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
}

func median(xs []float64) float64 {
	ys := slices.Clone(xs)
	slices.Sort(ys)
	return ys[len(ys)/2]
}
