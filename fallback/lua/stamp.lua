-- stamp: KEYS[1] the hash of when each ring partition was last written (field: the
-- partition, value: ms; field "e": the hash's epoch); ARGV[1] the time, ARGV[2] an epoch
-- for a hash that has none, ARGV[3..] the partitions. A stamp only rises: two writers
-- stamping at once (a handover) leave the later time. Returns the hash's epoch: one a
-- writer did not know says the stamps it made were lost (Redis emptied).
local e = redis.call('HGET', KEYS[1], 'e')
if not e then
  e = ARGV[2]
  redis.call('HSET', KEYS[1], 'e', e)
end
local t = tonumber(ARGV[1])
for i = 3, #ARGV do
  local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')
  if t > cur then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[1])
  end
end
return e
