#!/bin/sh
# Installs surflare-watchdog on a Linux laptop (what `make install` runs):
# the binary, the config in role laptop (kill switch for this host, no LAN
# tables), and the service file for the init system in use. It never
# enables or starts the service: it prints how to.
#
# Usage: scripts/install.sh BINARY
# Environment:
#   DESTDIR  staging root for packagers (default: none, install for real)
#   PREFIX   where the binary goes, PREFIX/bin (default /usr/local)
#   INIT     systemd | openrc | runit | none (default: detected)
#
# An existing /etc/config/surflare is kept; the new default is written next
# to it as surflare.new, the way opkg keeps a user's conffile.
set -eu

usage() {
	echo "usage: DESTDIR=... PREFIX=... INIT=... $0 BINARY" >&2
	exit 2
}

[ "$#" -eq 1 ] || usage
bin="$1"
[ -f "$bin" ] || {
	echo "install: binary $bin not found (run make build first)" >&2
	exit 1
}

src="$(cd "$(dirname "$0")/.." && pwd)"
destdir="${DESTDIR:-}"
prefix="${PREFIX:-/usr/local}"
bindir="$prefix/bin"
confdir=/etc/config

detect_init() {
	if [ -d /run/systemd/system ]; then
		echo systemd
	elif [ -d /run/openrc ] || command -v openrc-run >/dev/null 2>&1; then
		echo openrc
	elif [ -d /run/runit ] || [ -d /etc/runit ] || command -v runsvdir >/dev/null 2>&1; then
		echo runit
	else
		echo none
	fi
}
init="${INIT:-$(detect_init)}"

# install_service FILE DEST MODE: installs a service file, pointing it at
# the binary's real location.
install_service() {
	mkdir -p "$(dirname "$destdir$2")"
	sed "s#/usr/bin/surflare-watchdog#$bindir/surflare-watchdog#g" "$1" >"$destdir$2"
	chmod "$3" "$destdir$2"
	echo "installed $2"
}

mkdir -p "$destdir$bindir"
install -m 0755 "$bin" "$destdir$bindir/surflare-watchdog"
echo "installed $bindir/surflare-watchdog"

# The config, in role laptop. Private: it may hold the account name.
mkdir -p "$destdir$confdir"
conf="$destdir$confdir/surflare"
new="$conf"
if [ -e "$conf" ]; then
	new="$conf.new"
	echo "kept $confdir/surflare; the new default is $confdir/surflare.new"
fi
sed "s/^\([[:space:]]*option role \).*/\1'laptop'/" "$src/files/etc/config/surflare" >"$new"
chmod 0600 "$new"
grep -q "^[[:space:]]*option role 'laptop'" "$new" || {
	echo "install: could not set role laptop in $new" >&2
	exit 1
}
[ "$new" = "$conf" ] && echo "installed $confdir/surflare (role laptop)"

# Credentials (systemd-creds or a password file) live here.
mkdir -p "$destdir/etc/surflare"
chmod 0700 "$destdir/etc/surflare"

case "$init" in
systemd)
	unitdir=/etc/systemd/system
	[ "$prefix" = /usr ] && unitdir=/usr/lib/systemd/system
	install_service "$src/files/systemd/surflare-watchdog.service" "$unitdir/surflare-watchdog.service" 0644
	if [ -z "$destdir" ] && command -v systemctl >/dev/null 2>&1; then
		systemctl daemon-reload || true
	fi
	echo "enable with: systemctl enable --now surflare-watchdog"
	;;
openrc)
	install_service "$src/files/openrc/surflare-watchdog" /etc/init.d/surflare-watchdog 0755
	echo "enable with: rc-update add surflare-watchdog default && rc-service surflare-watchdog start"
	;;
runit)
	install_service "$src/files/runit/surflare-watchdog/run" /etc/sv/surflare-watchdog/run 0755
	install_service "$src/files/runit/surflare-watchdog/log/run" /etc/sv/surflare-watchdog/log/run 0755
	echo "enable with: ln -s /etc/sv/surflare-watchdog /var/service/  (or your runsvdir)"
	;;
none)
	echo "no init system detected (INIT=systemd|openrc|runit to choose one); start it with:"
	echo "  $bindir/surflare-watchdog run --config $confdir/surflare"
	;;
*)
	echo "install: INIT=$init: want systemd, openrc, runit or none" >&2
	exit 2
	;;
esac
