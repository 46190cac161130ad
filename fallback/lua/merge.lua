-- merge: add (bucket, count) pairs to the counter as leaparray.Store.Merge does (see
-- merge_pairs in common.lua): an unknown counter starts with its head at the newest
-- bucket given; a bucket past the head moves it; a bucket older than the window at the
-- head is dropped.
-- KEYS[1] the counter; KEYS[2], when given, a once-marker (same hash tag): if it exists
-- the merge was already applied and nothing is added.
-- ARGV: B, ttl (ms), marker ttl (ms), then j1, c1, j2, c2, ...
-- Returns 1 when applied, 0 when the marker said it already was.
if KEYS[2] and not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[3]) then
  return 0
end
if #ARGV >= 5 then
  merge_pairs(KEYS[1], tonumber(ARGV[1]), ARGV[2], 4, #ARGV)
end
return 1
