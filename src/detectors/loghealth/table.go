package loghealth

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"
)

// ReadOnce reads o's log once, as a Monitor's first poll at now does, and
// returns the report: the one-shot reader behind the CLI.
func ReadOnce(o Options, now time.Time) (Report, error) {
	m, err := NewMonitor(o)
	if err != nil {
		return Report{}, err
	}
	if err := m.PollOnce(now); err != nil {
		return Report{}, err
	}
	return m.Report(), nil
}

// tableErrorWidth keeps the summary table within a terminal.
const tableErrorWidth = 60

// WriteTable prints a report for people (`surflare-watchdog log-health`):
// the pairs with errors in a table, most errors first, and what was read.
func WriteTable(w io.Writer, o Options, r Report) {
	st := r.Stats
	fmt.Fprintf(w, "Proxy log %s: window %d min, unhealthy above %d errors\n", o.LogPath, r.WindowMinutes, r.Threshold)
	keys := make([]string, 0, len(r.Nodes))
	unhealthy := 0
	for k, p := range r.Nodes {
		keys = append(keys, k)
		if !p.UrltestHealthy {
			unhealthy++
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := r.Nodes[keys[i]], r.Nodes[keys[j]]
		if a.ErrorCount != b.ErrorCount {
			return a.ErrorCount > b.ErrorCount
		}
		return keys[i] < keys[j]
	})
	if len(keys) == 0 {
		fmt.Fprintln(w, "No urltest errors in the window: every node/transit is healthy.")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE VIA TRANSIT\tERRORS\tHEALTHY\tLAST ERROR")
		for _, k := range keys {
			p := r.Nodes[k]
			healthy := "yes"
			if !p.UrltestHealthy {
				healthy = "NO"
			}
			msg := []rune(p.LastError)
			if len(msg) > tableErrorWidth {
				msg = append(msg[:tableErrorWidth-1], '…')
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", k, p.ErrorCount, healthy, string(msg))
		}
		tw.Flush()
		fmt.Fprintf(w, "%d node/transit pairs with errors, %d unhealthy.\n", len(keys), unhealthy)
	}
	if st != nil {
		fmt.Fprintf(w, "Read %d lines (%d urltest errors, %d other, %d garbage, %d partial); %d older bytes skipped (tail bound %d bytes).\n",
			st.Lines, st.Matched, st.Ignored, st.Garbage, st.Partial, st.SkippedBytes, o.Tail)
	}
}
