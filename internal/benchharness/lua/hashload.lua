-- Loads counters for the memory comparison: leaves each key of KEYS as hashwindow.lua
-- leaves it after one call with n = 1 in each of the buckets first .. first+touches-1
-- (the same HINCRBY per bucket, in the same order, and the same expiry), many keys a
-- call, because ten million script calls a bucket would not fit the harness's time.
-- The harness checks on a few keys that the two leave the same hash (fields, values,
-- MEMORY USAGE) before it trusts this.
-- KEYS the counters. ARGV: first bucket, touches, expiry (ms).
local first, touches, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for _, k in ipairs(KEYS) do
  for j = first, first + touches - 1 do
    redis.call('HINCRBY', k, j, 1)
  end
  redis.call('PEXPIRE', k, ttl)
end
return #KEYS
