package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat times: 100 on every
// Linux architecture the watchdog ships for (sysconf needs cgo).
const clockTicks = 100

// ProcSample is one reading of a process's memory and CPU.
type ProcSample struct {
	At        time.Time
	RSSKB     int64 // VmRSS
	PeakRSSKB int64 // VmHWM
	// CPU used by the process itself, and by the children it has reaped.
	CPU, ChildCPU time.Duration
}

// ReadProc samples /proc/PID/status and /proc/PID/stat.
func ReadProc(pid int) (ProcSample, error) {
	s := ProcSample{At: time.Now()}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("reading process status: %w", err)
	}
	if s.RSSKB, s.PeakRSSKB, err = parseStatusMemory(status); err != nil {
		return s, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("reading process stat: %w", err)
	}
	if s.CPU, s.ChildCPU, err = parseStatCPU(stat); err != nil {
		return s, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return s, nil
}

// parseStatusMemory reads VmRSS and VmHWM (kB) from /proc/PID/status.
func parseStatusMemory(b []byte) (rss, hwm int64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	found := 0
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("%s: unexpected %q", k, v)
		}
		n, perr := strconv.ParseInt(f[0], 10, 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("%s: %w", k, perr)
		}
		if k == "VmRSS" {
			rss = n
		} else {
			hwm = n
		}
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("no VmRSS/VmHWM (a kernel thread or a zombie?)")
	}
	return rss, hwm, nil
}

// parseStatCPU reads utime+stime and cutime+cstime from /proc/PID/stat.
// The command name (field 2) may hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseStatCPU(b []byte) (self, children time.Duration, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime, stime, cutime, cstime are 14..17.
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("only %d fields", len(f)+2)
	}
	var t [4]int64
	for j := range t {
		if t[j], err = strconv.ParseInt(f[11+j], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("field %d: %w", 14+j, err)
		}
	}
	tick := time.Second / clockTicks
	return time.Duration(t[0]+t[1]) * tick, time.Duration(t[2]+t[3]) * tick, nil
}

// perHour scales a count over window to a rate per hour.
func perHour(n float64, window time.Duration) float64 {
	if window <= 0 {
		return 0
	}
	return n * float64(time.Hour) / float64(window)
}
