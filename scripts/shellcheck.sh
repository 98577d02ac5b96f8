#!/bin/sh
# Runs Debian's shellcheck over every shell script we ship: init scripts,
# hotplug and uci-defaults (files/etc), the laptop service scripts
# (files/openrc, files/runit), the ipk maintainer scripts (openwrt/ipk),
# anything under luci-app-surflare/root, and our own scripts/. A file counts
# as a shell script when its first line is a sh/ash/bash/openrc-run shebang,
# or when it is a hotplug.d script. Exits non-zero on any finding.
set -eu
cd "$(dirname "$0")/.."

command -v shellcheck >/dev/null 2>&1 || {
	echo "shellcheck is not installed (apt-get install shellcheck)" >&2
	exit 1
}

list=$(mktemp)
trap 'rm -f "$list"' EXIT
for dir in files openwrt luci-app-surflare/root scripts .ci; do
	[ -d "$dir" ] || continue
	find "$dir" -type f | sort | while IFS= read -r f; do
		case "$f" in
		*/hotplug.d/*)
			echo "$f"
			continue
			;;
		esac
		case "$(head -n 1 "$f")" in
		'#!/bin/sh'* | '#!/bin/ash'* | '#!/bin/bash'* | '#!/usr/bin/env sh'* | '#!/usr/bin/env bash'* | '#!/sbin/openrc-run'*)
			echo "$f"
			;;
		esac
	done
done >"$list"

echo "shellcheck $(shellcheck --version | sed -n 's/^version: //p') on $(wc -l <"$list") scripts"
# shellcheck disable=SC2046 # one argument per path; our paths have no spaces
shellcheck $(cat "$list")
