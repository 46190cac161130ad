-- The hash-bucket sliding window of the seeds (a Redis hash per counter, a field per
-- bucket: HINCRBY the current bucket, HGETALL, sum the buckets still in the window,
-- HDEL those that left it, expire the key), written for the benchmark harness. The
-- field is the bucket's index since the epoch (floor(now / L)), as leapcount aligns
-- buckets; the key expires a window after its last touch, when it counts 0.
-- KEYS[1] the counter. ARGV: now (Unix ms), window (ms), buckets, n.
-- Returns the count after adding n, as SW.INCR does.
local now, window, buckets, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local cur = math.floor(now / (window / buckets))
redis.call('HINCRBY', KEYS[1], cur, n)
local all = redis.call('HGETALL', KEYS[1])
local sum, old = 0, {}
for i = 1, #all, 2 do
  if tonumber(all[i]) > cur - buckets then
    sum = sum + tonumber(all[i + 1])
  else
    old[#old + 1] = all[i]
  end
end
if #old > 0 then
  redis.call('HDEL', KEYS[1], unpack(old))
end
redis.call('PEXPIRE', KEYS[1], window)
return sum
