#!/bin/sh
# ensure-redis.sh: install redis-server, redis-tools (redis-cli, redis-benchmark) and
# python3-redis (redis-py, whose RedisCluster the Redis Cluster client tests use) with
# apt-get when any is missing; do nothing when all are present. The tests start their own
# redis-server processes on free ports (internal/testredis), so this script keeps the
# package's system service from starting during the install (policy-rc.d), and stops
# and disables it afterwards if it runs under systemd anyway.
set -eu

has_redis_py() { [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import redis.cluster' >/dev/null 2>&1; }
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 && has_redis_py; then
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "ensure-redis.sh: redis-server is missing and installing it needs root (or sudo)" >&2
		exit 1
	fi
	SUDO="sudo"
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "ensure-redis.sh: redis-server is missing and apt-get is not available; install redis-server (>= 6.2) yourself" >&2
	exit 1
fi

# Keep invoke-rc.d / deb-systemd-invoke from starting the service while installing.
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
$SUDO apt-get install -y -q --no-install-recommends redis-server redis-tools python3-redis

# On a systemd host, leave no system-wide redis listening on :6379.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	$SUDO systemctl disable --now redis-server >/dev/null 2>&1 || true
fi

redis-server --version
