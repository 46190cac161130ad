-- The sorted-set log of the seeds (a member per event, scored by its time: ZADD it,
-- ZREMRANGEBYSCORE what left the window, ZCARD, expire the key), written for the
-- benchmark harness.
-- KEYS[1] the counter. ARGV: now (Unix ms), window (ms), member (unique per event).
-- Returns the count after adding the event, as SW.INCR does.
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local c = redis.call('ZCARD', KEYS[1])
redis.call('PEXPIRE', KEYS[1], window)
return c
