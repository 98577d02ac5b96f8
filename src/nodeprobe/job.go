package nodeprobe

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// ErrRunning: a probe is already running; its progress is in Status.
var ErrRunning = errors.New("a node probe is already running")

// JobStatus is a background probe's progress, as the control socket and
// ubus report it. Results grows as nodes finish; Report is set when the
// run is over.
type JobStatus struct {
	Running   bool      `json:"running"`
	Nodes     []string  `json:"nodes"`
	Index     int       `json:"index"` // 1-based number of the node in progress
	Current   string    `json:"current,omitempty"`
	Phase     string    `json:"phase,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	Results   []Result  `json:"results"`
	Report    *Report   `json:"report,omitempty"`
	Error     string    `json:"error,omitempty"`
	File      string    `json:"file,omitempty"` // where the results are written
}

// Jobs runs at most one probe at a time in the background and keeps the
// last one's status.
type Jobs struct {
	mu sync.Mutex
	st JobStatus
}

// RunFunc runs one probe, reporting progress.
type RunFunc func(ctx context.Context, progress func(Progress)) (Report, error)

// Start runs run in a goroutine that ends with ctx, unless a probe is
// already running (ErrRunning). It returns the status at the start.
func (j *Jobs) Start(ctx context.Context, nodes []string, file string, run RunFunc) (JobStatus, error) {
	j.mu.Lock()
	if j.st.Running {
		st := j.statusLocked()
		j.mu.Unlock()
		return st, ErrRunning
	}
	j.st = JobStatus{Running: true, Nodes: slices.Clone(nodes), StartedAt: time.Now(), Results: []Result{}, File: file}
	st := j.statusLocked()
	j.mu.Unlock()
	go func() {
		rep, err := run(ctx, j.progress)
		j.mu.Lock()
		defer j.mu.Unlock()
		j.st.Running, j.st.Current, j.st.Phase = false, "", ""
		if err != nil {
			j.st.Error = err.Error()
		}
		if rep.Nodes != nil {
			j.st.Report = &rep
			j.st.Results = rep.Nodes
		}
	}()
	return st, nil
}

func (j *Jobs) progress(p Progress) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.st.Index, j.st.Current, j.st.Phase = p.Index, p.Node, p.Phase
	if p.Phase == PhaseDone && p.Result != nil {
		j.st.Results = append(j.st.Results, *p.Result)
	}
}

// Status is a copy of the current (or last) probe's status.
func (j *Jobs) Status() JobStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.statusLocked()
}

func (j *Jobs) statusLocked() JobStatus {
	st := j.st
	st.Nodes = slices.Clone(st.Nodes)
	st.Results = slices.Clone(st.Results)
	if st.Results == nil {
		st.Results = []Result{}
	}
	return st
}
