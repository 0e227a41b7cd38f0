#!/usr/bin/env bash
# Installs, starts, serves, upgrades, removes and purges the Debian package
# on this machine, checking that the data outlives all of it. Needs root and
# apt-get; run `bash pkg/deb/build.sh` first (it builds revision 1; this
# script builds revision 2 beside it for the upgrade). systemd need not be
# running: the appliance runs with the installed unit's own User,
# WorkingDirectory and ExecStart, and is stopped with SIGTERM as
# `systemctl stop` would.
set -euo pipefail
cd "$(dirname "$0")/../.."

fail() {
	echo "install test: $*" >&2
	exit 1
}
[ "$(id -u)" = 0 ] || fail "needs root (apt-get install)"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
deb1=target/debian/stria_${version}-1_amd64.deb
[ -f "$deb1" ] || fail "$deb1 missing: run bash pkg/deb/build.sh"
dpkg -s stria >/dev/null 2>&1 && fail "stria is already installed here; remove it first"
[ -e /var/lib/stria ] && fail "/var/lib/stria exists; this test needs a machine without it"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# cargo deb clears target/debian: the first package waits aside.
cp "$deb1" "$tmp/"
deb1=$tmp/$(basename "$deb1")
cargo deb --no-build --strip --deb-revision 2 --output "$tmp/" >/dev/null
deb2=$tmp/stria_${version}-2_amd64.deb
[ -f "$deb2" ] || fail "cargo deb did not build $deb2"
port=6380

unit=/lib/systemd/system/stria.service
pid=
start() {
	local user dir cmd
	user=$(sed -n 's/^User=//p' "$unit")
	dir=$(sed -n 's/^WorkingDirectory=//p' "$unit")
	cmd=$(sed -n 's/^ExecStart=//p' "$unit")
	if [ -z "$user" ] || [ -z "$dir" ] || [ -z "$cmd" ]; then
		fail "$unit lacks User, WorkingDirectory or ExecStart"
	fi
	# shellcheck disable=SC2086 # ExecStart is a command line to split
	(cd "$dir" && exec setpriv --reuid="$user" --regid="$user" --init-groups $cmd) >/tmp/stria-install-test.log 2>&1 &
	pid=$!
	for _ in $(seq 300); do
		redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	cat /tmp/stria-install-test.log >&2
	fail "the installed appliance did not start"
}
stop() {
	kill -TERM "$pid"
	wait "$pid" || fail "the appliance did not stop cleanly on SIGTERM (status $?)"
	grep -q "stopped cleanly" /tmp/stria-install-test.log || fail "no clean stop: $(cat /tmp/stria-install-test.log)"
}

echo "== install $deb1"
apt-get install -y -qq "$deb1" >/dev/null
for f in /usr/bin/stria /etc/stria/stria.yaml "$unit" /lib/systemd/system/stria-hugepages.service \
	/usr/lib/stria/reserve.sh /usr/lib/stria/bind.sh /usr/share/man/man1/stria.1.gz \
	/usr/share/man/man1/stria-serve.1.gz /usr/share/bash-completion/completions/stria \
	/usr/share/zsh/vendor-completions/_stria /usr/share/fish/vendor_completions.d/stria.fish \
	/usr/share/stria/conf/nvme-4x.yaml /usr/share/stria/grafana/stria.json; do
	[ -e "$f" ] || fail "$f not installed"
done
getent passwd stria >/dev/null || fail "no stria user"
[ "$(stat -c %U /var/lib/stria)" = stria ] || fail "/var/lib/stria is not the stria user's"

echo "== start with the unit's command line, SET and GET"
start
grep -q "config: /etc/stria/stria.yaml (from --config)" /tmp/stria-install-test.log || fail "serve did not say which map it used"
redis-cli -p "$port" set install-test kept >/dev/null
[ "$(redis-cli -p "$port" get install-test)" = kept ] || fail "GET after SET"
[ -f /var/lib/stria/data/wal0.img ] || fail "the devices are not under data-dir"
# Without --config, the installed map is found.
out=$(cd /tmp && stria inspect)
echo "$out" | grep -q "from /etc/stria/stria.yaml" || fail "stria inspect did not find the installed map: $out"
stop

echo "== upgrade to $deb2"
apt-get install -y -qq "$deb2" >/dev/null
[ "$(dpkg-query -W -f='${Version}' stria)" = "${version}-2" ] || fail "not upgraded"
start
[ "$(redis-cli -p "$port" get install-test)" = kept ] || fail "the key did not survive the upgrade"
stop

echo "== remove"
apt-get remove -y -qq stria >/dev/null
[ ! -e /usr/bin/stria ] || fail "/usr/bin/stria left after remove"
[ -f /var/lib/stria/data/wal0.img ] || fail "remove deleted the data"
[ -f /etc/stria/stria.yaml ] || fail "remove deleted the conffile"

echo "== purge"
out=$(apt-get purge -y stria 2>&1)
echo "$out" | grep -q "The data was left in place: /var/lib/stria" || fail "purge did not say where the data is: $out"
for f in wal0 wal1 data0; do
	[ -f "/var/lib/stria/data/$f.img" ] || fail "purge deleted $f.img"
done

# This machine as it was, but the stria user.
rm -rf /var/lib/stria /etc/stria
echo "install test: install, serve, upgrade, remove and purge ok; the data outlived them"
