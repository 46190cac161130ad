#!/bin/sh
# ensure-redis.sh: install redis-server, redis-tools (redis-cli, redis-benchmark) and
# python3-redis (redis-py, whose RedisCluster the Redis Cluster client tests use) with
# apt-get when any is missing; do nothing when all are present. The tests start their own
# redis-server processes on free ports (internal/testkit/testredis), so the package's system
# service is kept from starting, and disabled (apt-install.sh).
set -eu

has_redis_py() { [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import redis.cluster' >/dev/null 2>&1; }
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 && has_redis_py; then
	exit 0
fi

"$(dirname "$0")/apt-install.sh" redis-server redis-tools python3-redis -- redis-server
redis-server --version
