# Drives a leapcount cluster with redis-py's RedisCluster, as a Redis Cluster user
# would: single commands, a cluster pipeline, and, on one node's plain RESP port, a
# default (MULTI/EXEC) pipeline. Prints one line per check; exits 1 on a mismatch.
import sys
from redis import Redis
from redis.cluster import RedisCluster

host, port, plain_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rc = RedisCluster(host=host, port=port)
want = {}
for i in range(200):
    key = "py:%d" % (i % 40)
    got = rc.execute_command("SW.INCR", key, "1h", "BY", 2)
    want[key] = want.get(key, 0) + 2
    if got != want[key]:
        print("SW.INCR %s: got %r, want %r" % (key, got, want[key]))
        sys.exit(1)
pipe = rc.pipeline()
for i in range(40):
    pipe.execute_command("SW.COUNT", "py:%d" % i, "1h")
counts = pipe.execute()
if counts != [want["py:%d" % i] for i in range(40)]:
    print("pipelined counts: got %r" % counts)
    sys.exit(1)
allow = rc.execute_command("SW.ALLOW", "py:0", "1h", 100)
if allow[:3] != [1, want["py:0"] + 1, 100 - want["py:0"] - 1]:
    print("SW.ALLOW: got %r" % allow)
    sys.exit(1)
tx = Redis(host=host, port=plain_port).pipeline()  # transaction=True: MULTI ... EXEC
tx.execute_command("SW.INCR", "tx", "1h")
tx.execute_command("SW.INCR", "tx", "1h")
tx.execute_command("SW.COUNT", "tx", "1h")
got = tx.execute()
if got != [1, 2, 2]:
    print("transaction: got %r" % got)
    sys.exit(1)
print("ok: %d keys through RedisCluster, pipelines and a transaction" % len(want))
