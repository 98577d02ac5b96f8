#!/bin/bash
# Installs what the tests, the lab and the demo need on a fresh Debian 12 machine
# (run as root). Idempotent: packages already present are skipped quickly.
set -euo pipefail

# qemu-user-static runs the aarch64, arm and mipsel builds in the cross-architecture test.
pkgs=(nftables iproute2 conntrack dnsmasq-base smartdns shellcheck procps psmisc ca-certificates chromium qemu-user-static)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Node.js: the machine image may ship its own (with npm); take Debian's only when absent.
command -v npm >/dev/null || missing+=(nodejs npm)
if [ "${#missing[@]}" -gt 0 ]; then
	echo "setup: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

export PATH=/usr/local/go/bin:$PATH
command -v go >/dev/null || { echo "setup: Go is not installed (expected /usr/local/go)"; exit 1; }
go mod download
# playwright-core (no browser download: it drives Debian's chromium) for the browser tests.
if [ ! -d build/browser/node_modules/playwright-core ]; then
	mkdir -p build/browser
	cp htdocs/test/package.json build/browser/package.json
	(cd build/browser && npm install --no-audit --no-fund --loglevel=error >/dev/null)
fi

echo "setup: ok ($(go version | awk '{print $3}'), $(nft --version))"
