package bench

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DescribeMachine says where the benchmark runs (for the report and
// bench/README.md: figures mean little without the machine).
func DescribeMachine(ctx context.Context, repoRoot string) Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version()}
	m.Hostname, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				m.MemoryMB = kb / 1024
			}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, "git", "rev-parse", "--short", "HEAD")
	cmd.Dir = repoRoot
	if out, err := cmd.Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	return m
}

// ReadSizes reads the binary and the x86_64 ipk that `make ipk` produced.
// ipkGlob may match several versions: the newest file wins.
func ReadSizes(binPath, ipkGlob string) Sizes {
	var s Sizes
	var missing []string
	if fi, err := os.Stat(binPath); err == nil {
		s.BinaryPath, s.BinaryBytes = binPath, fi.Size()
	} else {
		missing = append(missing, "binary "+binPath+" (run make build)")
	}
	matches, _ := filepath.Glob(ipkGlob)
	var newest time.Time
	for _, p := range matches {
		if fi, err := os.Stat(p); err == nil && fi.ModTime().After(newest) {
			newest, s.IPKPath, s.IPKBytes = fi.ModTime(), p, fi.Size()
		}
	}
	if s.IPKPath == "" {
		missing = append(missing, "ipk "+ipkGlob+" (run make ipk)")
	}
	if len(missing) > 0 {
		s.Error = "not found: " + strings.Join(missing, ", ")
	}
	return s
}
