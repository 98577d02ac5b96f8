package surflare

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// CloseInheritedOnExec marks every descriptor above stderr of this process
// close-on-exec. The daemon calls it as it starts, and every vendor call
// (run, loginPTY) calls it again right before the exec. The real proxy inherits every descriptor
// its parent left open (SURFLARE-CONTRACT E5: a lock held that way blocked
// every later reconnect), and Go's os/exec only passes 0-2 to a child when
// the rest is close-on-exec: what the daemon opens itself is, but what its
// own parent left open (procd, a shell, a supervisor's pipe) is not, and
// would reach `surflare` and through it `surflare-proxy`. The descriptors
// stay open for the process; a child still gets what exec.Cmd.ExtraFiles
// names (the child's dup2 clears the flag on its copy).
func CloseInheritedOnExec() {
	// close_range(2) with CLOSE_RANGE_CLOEXEC (Linux 5.11) does it in one
	// call; older kernels (OpenWrt 21.02 has 5.4) walk /proc/self/fd.
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
