-- members: lists one member of a cluster and returns the others listed (fallback/members.go).
-- KEYS[1] the cluster's list, a sorted set: gossip address -> when it was last listed
-- (Redis's own clock, ms, so that the members' clocks need not agree).
-- ARGV[1] this member's address, ARGV[2] how long a listing lasts (ms), ARGV[3] how
-- many listings the set keeps at most.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl, most = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -most - 1)
redis.call('PEXPIRE', KEYS[1], ttl)
return redis.call('ZREVRANGE', KEYS[1], 0, -1)
