-- common.lua is prepended to merge_many (Go adds it when it builds the script), and to
-- the per-operation scripts of the package's tests (testdata/ops), so the ring rules are
-- written once. It mirrors
-- leaparray/ring.go over one Redis hash per counter:
--
--   h    the head: the newest bucket index ever added to
--   s    the sum of the buckets in (h-B, h]
--   <j>  the count of bucket j (decimal index), for h-B < j <= h, only when non-zero
--
-- Every operation acts at bucket e = max(bucket(now), h). Buckets leave the hash as the
-- head passes them (their counts are needed then anyway, to keep s exact), so no script
-- ever scans for stale fields.
--
-- Exact counts. Lua's numbers are doubles, exact only up to 2^53, and counts go up to
-- 2^63-1. So a count is a Lua number only while it is below 2^53 (read from at most 15
-- digits, or a sum that stays below 2^53: nearly every count); a larger one is a pair
-- {hi, lo} = hi*1e9 + lo (both exact in a double). plus, minus and le take either form
-- and go to pairs when a number would not be exact, and str writes either as the
-- decimal string Redis and Go read. Counts are written back with HSET, as strings.
-- Bucket indexes are Lua numbers: exact up to 2^53 (a clock of 2^53 ms is 285,000
-- years away).

local E9 = 1000000000
local P53 = 9007199254740992 -- 2^53

local function fld(j)
  return string.format('%d', j)
end

-- num reads a count (a decimal integer 0 <= x < 2^63, or nil or false for 0).
local function num(v)
  if not v then
    return 0
  end
  local n = #v
  if n <= 15 then
    return tonumber(v)
  end
  return { tonumber(string.sub(v, 1, n - 9)), tonumber(string.sub(v, n - 8)) }
end

local ZERO = 0
local MAX = num('9223372036854775807')

-- pair is a count as a pair. For a number (an integer below 2^53) a / E9 may round up
-- to the next integer, so lo, exact (integers below 2^53), corrects hi.
local function pair(a)
  if type(a) == 'table' then
    return a
  end
  local hi = math.floor(a / E9)
  local lo = a - hi * E9
  if lo < 0 then
    return { hi - 1, lo + E9 }
  end
  return { hi, lo }
end

local function plus(a, b)
  if type(a) == 'number' and type(b) == 'number' then
    local c = a + b -- below 2^53 only when exact: rounding never goes below 2^53
    if c < P53 then
      return c
    end
  end
  a, b = pair(a), pair(b)
  local lo = a[2] + b[2]
  if lo >= E9 then
    return { a[1] + b[1] + 1, lo - E9 }
  end
  return { a[1] + b[1], lo }
end

-- minus is a - b, for a >= b.
local function minus(a, b)
  if type(a) == 'number' and type(b) == 'number' then
    return a - b
  end
  a, b = pair(a), pair(b)
  local lo = a[2] - b[2]
  if lo < 0 then
    return { a[1] - b[1] - 1, lo + E9 }
  end
  return { a[1] - b[1], lo }
end

local function le(a, b)
  if type(a) == 'number' and type(b) == 'number' then
    return a <= b
  end
  a, b = pair(a), pair(b)
  return a[1] < b[1] or (a[1] == b[1] and a[2] <= b[2])
end

-- str writes a count in decimal, as Redis and Go read it.
local function str(a)
  if type(a) == 'number' then
    return fld(a)
  end
  if a[1] == 0 then
    return fld(a[2])
  end
  return fld(a[1]) .. string.format('%09d', a[2])
end

-- overflow fails a write whose sum would not fit in a Redis integer, before it writes.
-- A number is below 2^53.
local function overflow(c)
  if type(c) == 'table' and not le(c, MAX) then
    error({ err = 'ERR count would overflow a 64-bit integer' })
  end
end

-- state returns the head and the sum, or nil (and a zero sum) when the counter does not
-- exist.
local function state(key)
  local v = redis.call('HMGET', key, 'h', 's')
  if not v[1] then
    return nil, ZERO
  end
  return tonumber(v[1]), num(v[2])
end

-- range sums the buckets lo..hi that exist and returns the sum and their field names. It
-- reads the named fields, or the whole hash when that is smaller, so it costs at most
-- min(hi-lo+1, B+2) fields.
local function range(key, lo, hi)
  local sum, names = ZERO, {}
  if hi < lo then
    return sum, names
  end
  if hi - lo + 1 > redis.call('HLEN', key) then
    local all = redis.call('HGETALL', key)
    for i = 1, #all, 2 do
      local j = tonumber(all[i]) -- nil for 'h' and 's'
      if j and j >= lo and j <= hi then
        sum = plus(sum, num(all[i + 1]))
        names[#names + 1] = all[i]
      end
    end
    return sum, names
  end
  local fs = {}
  for j = lo, hi do
    fs[#fs + 1] = fld(j)
  end
  local vs = redis.call('HMGET', key, unpack(fs))
  for i = 1, #fs do
    if vs[i] then
      sum = plus(sum, num(vs[i]))
      names[#names + 1] = fs[i]
    end
  end
  return sum, names
end

local ALL, STAY = {}, {} -- moves: the whole window leaves; nothing leaves

-- ahead looks at moving the head from h to e >= h, writing nothing: it returns the count
-- at e and the move, what put must write to make it: ALL when the whole window leaves
-- (the hash is dropped), else the names of the buckets that leave (STAY: none).
local function ahead(key, h, s, e, b)
  if e == h then
    return s, STAY
  end
  if e - h >= b then
    return ZERO, ALL
  end
  local gone, names = range(key, h - b + 1, e - b)
  return minus(s, gone), names
end

-- put writes what an operation decided: the head moved from h (nil for a new counter)
-- to e as mv (from ahead) says, then, in one HSET, the sum (s, exact), the head when it
-- moved, and kv's fields (bucket name, new count as a decimal string, ...); then, when
-- the head moved (or the counter is new), the key's TTL set (ms). The caller has
-- checked that the sum fits (overflow), and the counts are computed here, so no
-- command fails half-way. kv's buckets are in the window at e, so none of them is among
-- those the move deletes.
--
-- The TTL is set when the head moves, not on every write: a counter's buckets count
-- only until a window has passed its head bucket, and the head was first written no
-- earlier than its bucket began by the writer's clock, so a TTL of at least twice the
-- window set then outlives everything the hash holds while the nodes' clocks are within
-- a window of each other: the bound a counter written once always had. A write that
-- leaves the head where it is (most write-behind: a busy counter is flushed many times
-- per bucket) then costs two commands, not three (BenchmarkFlushDeltas/1buckets, same
-- run: redis-cmds/delta 3.01 -> 2.02, Redis's time 4.58-4.67 -> 3.75-3.83 µs/delta).
local function put(key, h, e, mv, s, kv, ttl)
  if mv == ALL then
    redis.call('DEL', key)
  elseif #mv > 0 then
    redis.call('HDEL', key, unpack(mv))
  end
  kv[#kv + 1], kv[#kv + 2] = 's', str(s)
  local moved = h ~= e or mv == ALL
  if moved then
    kv[#kv + 1], kv[#kv + 2] = 'h', fld(e)
  end
  redis.call('HSET', key, unpack(kv))
  if moved then
    redis.call('PEXPIRE', key, ttl)
  end
end

-- merge_one is merge_pairs for one pair (j, n as the caller's strings): write-behind's
-- common delta, one bucket per counter per flush. It is merge_pairs without the tables
-- that gather many pairs, which cost that case a fifth of the script's time (measured):
-- an HMGET of the head, the sum and bucket j, then one HSET, and a PEXPIRE only when the
-- head moves (put).
--
-- A counter Redis does not hold (no head) becomes its one bucket: the head at j, the sum
-- and the bucket n. That is what the general path below writes then, but written from
-- the caller's strings, which Go sends in canonical decimal (strconv, as fld and str
-- write them), with no arithmetic and no string.format: a flood of new keys is write-behind's costliest
-- case, and this its most common delta (BenchmarkFlushDeltas/1buckets/new).
--
-- absent says the caller knows Redis holds no such counter (merge_many checked the
-- call's keys at once): then not even the HMGET is needed, reset or not (erasing
-- nothing changes nothing), and a new counter costs an HSET and a PEXPIRE.
local function merge_one(key, reset, b, ttl, js, ns, absent)
  local j, f = tonumber(js), js -- f: fld(j), which js is already
  local h, s, v = nil, ZERO, nil
  if absent or not reset then
    local r = absent and {} or redis.call('HMGET', key, 'h', 's', f)
    if not r[1] then
      if ns == '0' then
        redis.call('HSET', key, 's', '0', 'h', js)
      else
        redis.call('HSET', key, js, ns, 's', ns, 'h', js)
      end
      redis.call('PEXPIRE', key, ttl)
      return
    end
    h, s, v = tonumber(r[1]), num(r[2]), r[3]
  end
  local e = math.max(h or j, j)
  local c, mv = ahead(key, h or e, s, e, b)
  local kv = {}
  if j > e - b and ns ~= '0' then
    local n = num(ns)
    kv[1], kv[2] = f, str(plus(num(v), n))
    c = plus(c, n)
  end
  overflow(c)
  if reset then
    redis.call('DEL', key)
  end
  put(key, h, e, mv, c, kv, ttl)
end

-- merge_pairs adds the (bucket, count) pairs ARGV[lo], ARGV[lo+1], ..., ARGV[hi-1],
-- ARGV[hi] to the counter as leaparray.Store.Merge does; with reset it first erases the
-- counter, as leaparray.Store.TryReset does. Adding the pairs one by one in order ends in
-- the same hash as first moving the head to H = max(head, newest pair) and then adding
-- the pairs newer than H-B: the head only grows, so a pair kept the first way is within
-- (H-B, H], and one dropped is at or before H-B. So this reads the head, the sum and the
-- pairs' buckets in one HMGET (only those newer than top-B, where top is the newest
-- pair: at most B, so unpack stays within Lua's limits), moves the head once (at most B
-- fields read and deleted) and writes the sum, the head and each bucket's new count in
-- one HSET: three commands when the head does not move, whatever the number of pairs.
-- The counts read before the head moves stay right: moving it deletes only buckets at
-- or before H-B, and those are not written. Everything is read and checked before the
-- first write, so a counter that fails (a key of the wrong type, a sum past 2^63-1)
-- fails before it writes. An unknown counter starts with its head at H. absent: see
-- merge_one.
local function merge_pairs(key, reset, b, ttl, lo, hi, absent)
  if hi < lo then -- a reset alone (or one past its deadline: nothing)
    if reset and not absent then
      redis.call('DEL', key)
    end
    return
  end
  if hi == lo + 1 then
    return merge_one(key, reset, b, ttl, ARGV[lo], ARGV[hi], absent)
  end
  local top = tonumber(ARGV[lo])
  for i = lo + 2, hi, 2 do
    top = math.max(top, tonumber(ARGV[i]))
  end
  -- the buckets that may count, each once, and what they gain
  local names, js, gain = {}, {}, {}
  for i = lo, hi, 2 do
    local j, ns = tonumber(ARGV[i]), ARGV[i + 1]
    if j > top - b and ns ~= '0' then
      local f = fld(j)
      local g = gain[f]
      if g then
        gain[f] = plus(g, num(ns))
      else
        names[#names + 1], js[#js + 1], gain[f] = f, j, num(ns)
      end
    end
  end
  local h, s, v = nil, ZERO, {}
  if not reset then
    v = redis.call('HMGET', key, 'h', 's', unpack(names))
    if v[1] then
      h, s = tonumber(v[1]), num(v[2])
    end
  end
  local e = top
  if h then
    e = math.max(h, top)
  end
  local c, mv = ahead(key, h or e, s, e, b)
  local kv, total = {}, ZERO
  for k, f in ipairs(names) do
    if js[k] > e - b then
      total = plus(total, gain[f])
      kv[#kv + 1], kv[#kv + 2] = f, str(plus(num(v[k + 2]), gain[f]))
    end
  end
  local sum = plus(c, total) -- each bucket's count is part of it, so it bounds them
  overflow(sum)
  if reset then
    redis.call('DEL', key)
  end
  put(key, h, e, mv, sum, kv, ttl)
end
