-- merge: add (bucket, count) pairs to the counter, in order, as leaparray.Store.Merge
-- does: an unknown counter starts with its head at the newest bucket given; a bucket past
-- the head moves it; a bucket older than the window at the head is dropped.
-- KEYS[1] the counter; KEYS[2], when given, a once-marker (same hash tag): if it exists
-- the merge was already applied and nothing is added.
-- ARGV: B, ttl (ms), marker ttl (ms), then j1, c1, j2, c2, ...
-- Returns 1 when applied, 0 when the marker said it already was.
local key, b = KEYS[1], tonumber(ARGV[1])
if KEYS[2] and not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[3]) then
  return 0
end
if #ARGV < 5 then
  return 1
end
local h, s = state(key)
if not h then
  h = tonumber(ARGV[4])
  for i = 6, #ARGV, 2 do
    h = math.max(h, tonumber(ARGV[i]))
  end
end
for i = 4, #ARGV, 2 do
  h, s = add(key, h, s, tonumber(ARGV[i]), ARGV[i + 1], b)
end
save(key, h, s, ARGV[2])
return 1
