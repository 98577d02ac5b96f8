#!/bin/bash
# Installs what the tests, the lab and the demo need on a fresh Debian 12 machine
# (run as root). Idempotent: packages already present are skipped quickly.
set -euo pipefail

pkgs=(nftables iproute2 conntrack dnsmasq-base smartdns shellcheck procps psmisc ca-certificates)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "setup: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

export PATH=/usr/local/go/bin:$PATH
command -v go >/dev/null || { echo "setup: Go is not installed (expected /usr/local/go)"; exit 1; }
go mod download
echo "setup: ok ($(go version | awk '{print $3}'), $(nft --version))"
