-- merge_many: merge many counters' deltas in one call, each as leaparray.Store.Merge
-- does (a delta with its reset flag first erases the counter, as TryReset does), applied
-- at most once when given its writer's key. A Batch sends it, so that write-behind costs
-- one command per many counters instead of one per counter. In a Cluster every key
-- (the writer key too) is in one slot.
-- ARGV[1]: the writer key's TTL (ms), or 0 for none (Merge: no writer key, applied each
-- time). ARGV[2]: the call's seq. ARGV[3]: its wait, the seq of the writer's call
-- before it in this key that was not confirmed when this was sent (0: none).
-- KEYS: the writer key (when ARGV[1] is not 0), holding the highest seq of its writer
-- applied in this slot, then the counters, a counter once per delta (its deltas in
-- order). ARGV, from ARGV[4], for each counter in turn: reset, B, ttl (ms), m, then m
-- (bucket, count) pairs j1, c1, ..., jm, cm (m = 0: a reset alone). reset is 0 (none),
-- 1 (erase first), or a deadline on Redis's clock (µs since the Unix epoch, TIME): d > 1
-- erases first only before d, and later merges the pairs alone; -d, a counter's whole
-- state (fallback.Delta.Base), is merged only before d, and later skipped. A deadline
-- is the end of its writer's lease: after it another node may have written the counter,
-- and a late reset would erase that.
-- Returns {0, t} when seq is not above the mark: applied before, and nothing is done
-- but refresh the mark's TTL. {2}
-- when the mark is below the wait: the call before has not applied, and this one must
-- not pass it (nothing is done either; the writer sends both again). Else the call is
-- applied: {1, r1, r2, ..., t}, one reply per counter in order, 1 when merged, 3 when
-- merged without its reset or skipped (past its deadline), else the error message.
-- t is Redis's clock (µs) as the call ran: writers measure deadlines from it. Setting the mark is the script's first write, so a call that fails
-- before it leaves nothing, and one that passes it runs to the end: a counter that
-- fails (its key holds a string, WRONGTYPE) fails before it writes and does not stop the
-- others, as Redis does not undo a script's writes when the script fails.
local now -- Redis's clock, µs, read once
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return now
end

local first, res = 1, { 1 }
if ARGV[1] ~= '0' then
  local mark = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
  if mark >= tonumber(ARGV[2]) then
    -- A write (the mark's TTL, refreshed), so that a WAIT after this call covers the
    -- run that applied it, perhaps on another connection (fallback/replicas.go).
    redis.call('PEXPIRE', KEYS[1], ARGV[1])
    return { 0, clock() }
  end
  if mark < tonumber(ARGV[3]) then
    return { 2 }
  end
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[1])
  first = 2
end
-- A key flood's calls hold only counters Redis has never seen, and one EXISTS over
-- them all tells so for the price of a lookup each, where an HMGET a counter would ask
-- each (BenchmarkFlushDeltas/1buckets/new: redis-cmds/delta). Then a counter met for
-- the first time in this call is absent; met again (a counter's deltas all come in one
-- call), it is not. Any key held sends every counter the usual way. The first key is
-- asked alone first, so that a call of counters Redis holds (write-behind of busy
-- counters, the common case) pays one lookup, not one a counter.
local none = first > #KEYS or redis.call('EXISTS', KEYS[first]) == 0
for i = first + 1, #KEYS, 1000 do -- unpack stays far within Lua's stack
  if not none then
    break
  end
  none = redis.call('EXISTS', unpack(KEYS, i, math.min(i + 999, #KEYS))) == 0
end
-- new_counter is merge_one for a counter Redis does not hold and one (bucket, count)
-- pair, a key flood's every delta: its HSET and PEXPIRE, called with redis.pcall, which
-- answers a failure (an OOM) as a value, instead of inside a pcall of merge_pairs: the
-- calls between them, the empty table merge_one reads and the pcall cost Redis about a
-- fifth of a new counter's time (BenchmarkFlushDeltas/1buckets/new: redis-us/delta).
local function new_counter(key, ttl, js, ns)
  local r
  if ns == '0' then
    r = redis.pcall('HSET', key, 's', '0', 'h', js)
  else
    r = redis.pcall('HSET', key, js, ns, 's', ns, 'h', js)
  end
  if type(r) == 'table' and r.err then
    return false, r.err
  end
  r = redis.pcall('PEXPIRE', key, ttl)
  if type(r) == 'table' and r.err then
    return false, r.err
  end
  return true
end

local met = {}
local a = 4
for k = first, #KEYS do
  local m = tonumber(ARGV[a + 3])
  local lo = a + 4
  local key = KEYS[k]
  local absent = none and not met[key]
  met[key] = true
  -- (The common delta, no reset, costs one string comparison here: with a tonumber a
  -- counter first, BenchmarkFlushDeltas's redis-us/delta rose.)
  local rs, reset, late, whole = ARGV[a], false, false, false
  if rs ~= '0' then
    if rs == '1' then
      reset = true
    else
      local by = tonumber(rs)
      whole = by < 0
      late = clock() >= math.abs(by)
      reset = not late
    end
  end
  local ok, err = true, nil
  if late and whole then
    -- A whole state past its deadline: what Redis holds may be newer.
  elseif absent and m == 1 then -- (reset or not: erasing nothing changes nothing)
    ok, err = new_counter(key, ARGV[a + 2], ARGV[lo], ARGV[lo + 1])
  else
    ok, err = pcall(merge_pairs, key, reset, tonumber(ARGV[a + 1]), ARGV[a + 2], lo, lo + 2 * m - 1, absent)
  end
  a = lo + 2 * m
  if ok and late then
    res[#res + 1] = 3
  elseif ok then
    res[#res + 1] = 1
  else
    if type(err) == 'table' then
      err = err.err
    end
    res[#res + 1] = tostring(err)
  end
end
res[#res + 1] = clock()
return res
