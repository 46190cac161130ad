#!/bin/sh
# apt-install.sh PACKAGE... [-- SERVICE...]: install Debian packages with apt-get, as root
# or through sudo, keeping their system services from starting (policy-rc.d during the
# install), and stop and disable SERVICE... afterwards on a systemd host, so that no
# package leaves a server listening that a test did not start. The ensure-*.sh scripts
# call it when something is missing.
set -eu

PKGS=""
SERVICES=""
seen_dashes=""
for a in "$@"; do
	if [ "$a" = "--" ]; then seen_dashes=1; continue; fi
	if [ -n "$seen_dashes" ]; then SERVICES="$SERVICES $a"; else PKGS="$PKGS $a"; fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "apt-install.sh: installing$PKGS needs root (or sudo)" >&2
		exit 1
	fi
	SUDO="sudo"
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "apt-install.sh: apt-get is not available; install$PKGS yourself" >&2
	exit 1
fi

# Keep invoke-rc.d / deb-systemd-invoke from starting the services while installing.
POLICY=/usr/sbin/policy-rc.d
ADDED_POLICY=""
if [ ! -e "$POLICY" ]; then
	printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
	$SUDO chmod 755 "$POLICY"
	ADDED_POLICY=1
fi
cleanup() {
	if [ -n "$ADDED_POLICY" ]; then
		$SUDO rm -f "$POLICY"
	fi
}
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $PKGS

if [ -n "$SERVICES" ] && command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	for s in $SERVICES; do
		$SUDO systemctl disable --now "$s" >/dev/null 2>&1 || true
	done
fi
