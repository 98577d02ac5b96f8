// Package luciapp is the home of luci-app-surflare's test in the real
// LuCI: the OpenWrt box (the OpenWrt 24.10 userland beside the repository,
// ../shared/owrt) is booted in a network namespace, the freshly built
// packages are installed with its opkg, and headless Chromium in a client
// namespace uses Services → Surflare through the box's uhttpd, over http
// and https (htdocs/test/luci-box.mjs). The package itself has no code:
// the app is JavaScript and JSON under luci-app-surflare/.
package luciapp
