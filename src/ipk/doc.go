// Package ipk writes and reads OpenWrt .ipk packages without the OpenWrt SDK,
// so `make ipk` works on any machine with Go.
//
// The format is the one opkg-lede accepts (see ../shared/fixtures/ipk): an
// outer gzip-compressed tar — not an ar archive like a Debian .deb — holding
// ./debian-binary, ./data.tar.gz and ./control.tar.gz. Build writes exactly
// that, deterministically (owner 0:0, mtime 0, sorted names). Read unpacks a
// file the way opkg does and reports what opkg would call malformed;
// Target.CheckInstall models opkg's architecture and dependency checks; Lint
// holds our own stricter layout rules; CheckStaticBinary proves a binary
// needs no libc.
package ipk
