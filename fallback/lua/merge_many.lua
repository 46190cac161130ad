-- merge_many: merge many counters' deltas in one call, each as merge.lua does (without
-- once-markers). FlushDeltas sends it, so that write-behind costs one command per many
-- counters instead of one per counter. In a Cluster every key is in one slot.
-- KEYS: the counters. ARGV, for each key in turn: B, ttl (ms), m, then m >= 1 (bucket,
-- count) pairs j1, c1, ..., jm, cm.
-- Returns one reply per key, in order: 1 when merged, else the error message. A key that
-- fails (say it holds a string, WRONGTYPE) fails at its first command, before it writes,
-- and does not stop the others: Redis does not undo a script's writes when the script
-- fails, so an error escaping here would leave the keys before it merged and the caller
-- unable to tell which.
local res, a = {}, 1
for k = 1, #KEYS do
  local b, ttl, m = tonumber(ARGV[a]), ARGV[a + 1], tonumber(ARGV[a + 2])
  local lo = a + 3
  a = lo + 2 * m
  local ok, err = true, nil
  if m > 0 then
    ok, err = pcall(merge_pairs, KEYS[k], b, ttl, lo, a - 1)
  end
  if ok then
    res[k] = 1
  else
    if type(err) == 'table' then
      err = err.err
    end
    res[k] = tostring(err)
  end
end
return res
