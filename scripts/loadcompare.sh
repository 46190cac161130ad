#!/usr/bin/env bash
# Load comparison: redis-benchmark against SW.INCR on a leapcount node and INCR on a
# local redis-server, in the same run, on this machine. Prints both.
#
#   scripts/loadcompare.sh [requests] [clients] [pipeline]
#
# Everything runs on 127.0.0.1 on free ports and is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-500000}
C=${2:-50}
P=${3:-1}
./scripts/ensure-redis.sh >/dev/null

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" --daemonize no >"$work/redis.log" 2>&1 &
pids+=($!)

CGO_ENABLED=0 go build -o "$work/node" ./cmd/node
hport=$(free_port); sport=$(free_port); gport=$(free_port); cport=$(free_port)
"$work/node" --name bench --http "127.0.0.1:$hport" --resp "127.0.0.1:$sport" \
  --gossip "127.0.0.1:$gport" --rpc "127.0.0.1:$cport" --log-level warn >"$work/node.log" 2>&1 &
pids+=($!)

for port in "$rport" "$sport"; do
  for _ in $(seq 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
done

echo "# $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg); requests $N, clients $C, pipeline $P, keyspace 100000"
echo "## redis-server $(redis-server --version | grep -o 'v=[0-9.]*'): INCR k:__rand_int__"
bench() { redis-benchmark -c "$C" -n "$N" -r 100000 -P "$P" -q "$@" | tr '\r' '\n' | tail -n 2 | grep -v '^$'; }
bench -p "$rport" INCR 'k:__rand_int__'
echo "## leapcount node: SW.INCR k:__rand_int__ 60s"
bench -p "$sport" SW.INCR 'k:__rand_int__' 60s
echo "## redis-server, Lua sliding window (hash buckets, one script call per request)"
sha=$(redis-cli -p "$rport" SCRIPT LOAD "$(cat <<'LUA'
local b = math.floor(tonumber(ARGV[1]) / 6000)
redis.call('HINCRBY', KEYS[1], b, 1)
local all = redis.call('HGETALL', KEYS[1])
local sum = 0
for i = 1, #all, 2 do
  if tonumber(all[i]) > b - 10 then sum = sum + tonumber(all[i+1]) else redis.call('HDEL', KEYS[1], all[i]) end
end
redis.call('PEXPIRE', KEYS[1], 120000)
return sum
LUA
)")
bench -p "$rport" EVALSHA "$sha" 1 'w:__rand_int__' "$(date +%s%3N)"
