// Package keepalive keeps the carrier-grade NAT mappings of the proxy's idle
// tunnel connections alive by clamping their TCP keepalive in the kernel.
//
// Routers behind CGNAT lose idle TCP mappings after a few minutes; the
// long-lived connections the proxy holds to its relay then die silently and
// the next request stalls until TCP gives up. The proxy is proprietary, so
// its sockets cannot be configured from the inside. Instead the watchdog
// creates a cgroup2 group for the proxy (New), moves the proxy into it after
// each connect (AddPID), and attaches two BPF programs to the group:
//
//   - a SOCK_OPS program that, when a TCP connection is established (made
//     or accepted), turns on SO_KEEPALIVE and sets TCP_KEEPIDLE,
//     TCP_KEEPINTVL and TCP_KEEPCNT to the configured values (30 s, 10 s, 3
//     by default);
//   - a cgroup setsockopt program that caps those three options when the
//     application sets them itself later, at the configured values. Go's
//     net.Dialer does exactly that: after connect it re-applies its own
//     keepalive (15 s idle, 15 s interval, 9 probes), overwriting what the
//     SOCK_OPS program set a moment earlier. With the cap such a socket ends
//     up with 15 s idle (more eager than 30 s, kept), 10 s and 3. This is
//     also why the tests open their connections with raw syscalls, as the
//     real proxy does (sing-box sets its keepalive before connect, or not at
//     all), and check Go's dialer separately.
//
// The programs are built by the package's own small assembler (asm.go; no
// clang at build or run time) and loaded through the bpf(2) system call
// directly (sys.go, objects.go, attach.go). A general BPF library
// (cilium/ebpf, with its BTF, ELF and kallsyms support) cost the static
// binary about 1 MB for these two programs, and on a router nearly every
// page of the binary ends up resident.
//
// The kernel ties a socket to the cgroup of the process that created it, at
// creation. Sockets the proxy opened before AddPID moved it keep their old
// group and are not clamped; connections accepted on a listener inherit the
// listener's group. The relay connections the clamp is for are opened after
// the proxy starts, so moving it right after each connect covers them.
//
// When the kernel lacks a piece (the bpf() system call, a cgroup2 mount,
// SOCK_OPS attachment), New returns an error that says which, once, and a
// Clamp that reports it in Status and does nothing else: the watchdog runs
// on without the clamp. Programs are attached with bpf_link where the kernel
// has it, so a crashed watchdog's programs go away with its file
// descriptors; CleanupStale removes what is left (the group, or programs
// attached the legacy way).
package keepalive
