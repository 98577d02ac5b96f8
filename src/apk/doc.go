// Package apk writes and reads apk v3 packages (the ADB format of
// apk-tools 3, which OpenWrt 25.12 installs with), without apk-tools, so
// `make apk` works on any machine with Go.
//
// A package is "ADBd" followed by a raw deflate stream of an ADB file:
// the "ADB." magic and the "pckg" schema, one ADB block holding the
// package's metadata (info, paths with their files and ACLs, scripts) as a
// tree of 32-bit typed values, then one data block per non-empty regular
// file. Build lays that tree out the way `apk mkpkg` does: the same write
// order, the same de-duplication of identical values, the same sorting and
// alignment, so the uncompressed bytes equal mkpkg's for the same input
// (SOURCE_DATE_EPOCH=0, files owned by root). The package is unsigned; a
// router installs it with `apk add --allow-untrusted`. Read parses a
// package back for checks.
package apk
