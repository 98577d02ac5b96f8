package nodeprobe

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Follow polls a probe someone else runs (the daemon's, through status)
// every poll until it is over, writing a line to progress per finished
// node and per new phase, and returns its report. warn gets what does not
// fail the probe (a node's error while others succeeded).
func Follow(ctx context.Context, status func(context.Context) (JobStatus, error), poll time.Duration,
	progress io.Writer, warn func(string)) (Report, error) {
	printed, lastPhase := 0, ""
	for {
		st, err := status(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return Report{}, ctx.Err()
			}
			return Report{}, fmt.Errorf("following the daemon's probe: %w", err)
		}
		for ; printed < len(st.Results); printed++ {
			r := st.Results[printed]
			fmt.Fprintf(progress, "[%d/%d] %s: %s\n", printed+1, len(st.Nodes), r.Node, r.Summary())
		}
		if st.Running && st.Current != "" && st.Phase+st.Current != lastPhase && st.Phase != PhaseDone {
			lastPhase = st.Phase + st.Current
			fmt.Fprintf(progress, "[%d/%d] %s: %s…\n", st.Index, len(st.Nodes), st.Current, st.Phase)
		}
		if !st.Running {
			if st.Report == nil {
				return Report{}, fmt.Errorf("the daemon's probe failed: %s", st.Error)
			}
			if st.Error != "" {
				warn(st.Error)
			}
			fmt.Fprintf(progress, "back on %s (the daemon reconnects it); results in %s\n", st.Report.OriginalNode, st.File)
			return *st.Report, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(poll):
		}
	}
}
