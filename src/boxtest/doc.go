// Package boxtest holds the tests that run the package on real OpenWrt: the
// lab's router namespace hosts the OpenWrt 24.10 userland kept beside the
// checkout (src/owrtbox), the freshly built ipks are installed with its
// opkg, and each test is something a router owner does (install, configure,
// ifdown, fw4 restart, reboot, remove) checked the way they would see it:
// procd, ubus, rpcd, logread and nft, and the lab's leak counters.
//
// The tests need root, the box (../shared/owrt) and `make ipk` output; they
// skip, saying which is missing, otherwise.
package boxtest
