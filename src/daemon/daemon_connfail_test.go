package daemon

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/config"
)

func failLine112(node, dest string) string {
	return fmt.Sprintf("+0000 2026-11-29 14:03:11 ERROR [2210337101 5.8s] connection: open connection to %s using outbound/vless[%s]: dial tcp 198.18.5.7:443: i/o timeout", dest, node)
}

func failLine111(dest string) string {
	return fmt.Sprintf("+0000 2026-11-29 14:03:11 ERROR [1820334452 5.0s] inbound/tproxy[tproxy-in]: process connection from 198.18.1.10:51234: dial tcp %s: i/o timeout", dest)
}

func newTestConnFail(t *testing.T, node *string) (*connFailWatch, *[]string, *time.Time) {
	t.Helper()
	c := config.Default()
	c.Main.Candidates = []string{"Dallas", "Los Angeles", "Chicago"}
	var asked []string
	w, err := newConnFailWatch(c, func() (string, string) { return *node, "auto" }, func(r string) { asked = append(asked, r) })
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(5000, 0)
	w.now = func() time.Time { return now }
	return w, &asked, &now
}

func TestConnFailAsksForACheckWhenTheNodeFailsEverywhere(t *testing.T) {
	node := "Dallas"
	w, asked, now := newTestConnFail(t, &node)
	w.observe(failLine112("Dallas", "a.example:443"))
	w.observe(failLine111("198.18.30.1:443")) // the old format: the node in use
	if len(*asked) != 0 {
		t.Fatalf("two failures asked already: %v", *asked)
	}
	*now = now.Add(time.Second)
	w.observe(failLine112("Dallas", "b.example:443"))
	if len(*asked) != 1 || !strings.Contains((*asked)[0], "CONN_FAIL: 3 LAN connections to 3 destinations failed via Dallas") {
		t.Fatalf("asked %v", *asked)
	}
	w.observe(failLine112("Dallas", "c.example:443"))
	if len(*asked) != 1 {
		t.Fatalf("asked again within the gap: %v", *asked)
	}
}

func TestConnFailIgnoresOneDeadSiteAndOtherNodes(t *testing.T) {
	node := "Dallas"
	w, asked, _ := newTestConnFail(t, &node)
	for i := 0; i < 10; i++ {
		w.observe(failLine112("Dallas", "dead.example:443")) // one website down
		w.observe(failLine112("Chicago", fmt.Sprintf("h%d:443", i)))
	}
	w.observe("+0000 2026-11-29 14:03:11 ERROR [1 0.1s] connection: open connection to x:443 using outbound/vless[Dallas]: context canceled")
	if len(*asked) != 0 {
		t.Fatalf("asked for one dead site or another node's failures: %v", *asked)
	}
	// After a rotation the new node starts clean, and a vendor tag that
	// names no candidate counts for the node in use.
	node = "Chicago"
	w.observe(failLine112("proxy", "a:443"))
	w.observe(failLine112("proxy", "b:443"))
	if len(*asked) != 0 {
		t.Fatalf("Chicago's earlier failures while another node was in use must not count twice: %v", *asked)
	}
}
