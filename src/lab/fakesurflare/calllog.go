package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"surflare-watchdog/src/lab/fakes"
)

// recordCall appends this invocation to the lab's CLI call log
// (fakes.CLICallsFile) with the descriptors above stderr the caller let it
// inherit. It runs before anything else of the command, so what it lists
// is what the caller passed; a failure to record is not the command's.
func recordCall(labDir string, args []string) {
	c := fakes.CLICall{At: time.Now(), PID: os.Getpid(), PPID: os.Getppid(), Inherited: inheritedFDs()}
	if len(args) > 0 {
		c.Cmd, c.Args = args[0], args[1:]
	}
	line, err := json.Marshal(c)
	if err != nil {
		return
	}
	f, err := os.OpenFile(filepath.Join(labDir, fakes.CLICallsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	f.Write(append(line, '\n')) // one write: lines of concurrent calls do not interleave
}

// inheritedFDs lists the open descriptors above stderr that are not
// close-on-exec: everything the Go runtime opens is, so these came from
// the caller.
func inheritedFDs() []fakes.InheritedFD {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	var out []fakes.InheritedFD
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		p := fmt.Sprintf("/proc/self/fd/%d", fd)
		x := fakes.InheritedFD{FD: fd}
		x.Target, _ = os.Readlink(p)
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil {
			x.Dev, x.Ino = uint64(st.Dev), st.Ino
		}
		out = append(out, x)
	}
	return out
}
