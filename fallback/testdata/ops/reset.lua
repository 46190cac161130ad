-- reset: forget the counter; 1 if it existed at now (held, with its head still in the
-- window: head > bucket(now) - B), else 0, as leaparray.Store.TryReset answers.
-- KEYS[1] the counter; ARGV[1] bucket(now); ARGV[2] B.
local h = redis.call('HGET', KEYS[1], 'h')
redis.call('DEL', KEYS[1])
if h and tonumber(h) > tonumber(ARGV[1]) - tonumber(ARGV[2]) then
  return 1
end
return 0
