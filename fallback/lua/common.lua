-- common.lua is prepended to every script of package fallback (Go adds it when it
-- builds each script), so the ring rules are written once. It mirrors
-- leaparray/ring.go over one Redis hash per counter:
--
--   h    the head: the newest bucket index ever added to
--   s    the sum of the buckets in (h-B, h]
--   <j>  the count of bucket j (decimal index), for h-B < j <= h, only when non-zero
--
-- Every operation acts at bucket e = max(bucket(now), h). Buckets leave the hash as the
-- head passes them (their counts are needed then anyway, to keep s exact), so no script
-- ever scans for stale fields. Indexes and counts are exact in Lua's doubles up to 2^53.

local function fld(j)
  return string.format('%d', j)
end

-- state returns the head and the sum, or nil when the counter does not exist.
local function state(key)
  local v = redis.call('HMGET', key, 'h', 's')
  if not v[1] then
    return nil, 0
  end
  return tonumber(v[1]), tonumber(v[2])
end

-- range sums the buckets lo..hi that exist and returns the sum and their field names. It
-- reads the named fields, or the whole hash when that is smaller, so it costs at most
-- min(hi-lo+1, B+2) fields.
local function range(key, lo, hi)
  local sum, names = 0, {}
  if hi < lo then
    return sum, names
  end
  if hi - lo + 1 > redis.call('HLEN', key) then
    local all = redis.call('HGETALL', key)
    for i = 1, #all, 2 do
      local j = tonumber(all[i]) -- nil for 'h' and 's'
      if j and j >= lo and j <= hi then
        sum = sum + tonumber(all[i + 1])
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
      sum = sum + tonumber(vs[i])
      names[#names + 1] = fs[i]
    end
  end
  return sum, names
end

-- count_at is the count at bucket e >= h: the buckets up to e-B have left the window.
local function count_at(key, h, s, e, b)
  if e - h >= b then
    return 0
  end
  if e == h then
    return s
  end
  local gone = range(key, h - b + 1, e - b)
  return s - gone
end

-- advance moves the head from h to e > h: the buckets that leave the window are
-- subtracted from the sum and deleted. It returns the new sum. A jump of a whole window
-- or more drops the hash (the caller writes h and s again).
local function advance(key, h, s, e, b)
  if e - h >= b then
    redis.call('DEL', key)
    return 0
  end
  local gone, names = range(key, h - b + 1, e - b)
  if #names > 0 then
    redis.call('HDEL', key, unpack(names))
  end
  return s - gone
end

-- add adds n (ns: n as the caller's decimal string, added exactly by HINCRBY) to bucket
-- j and returns the new head and sum: a j past the head moves the head, a j within the
-- window adds in place, an older j counts for nothing and is dropped.
local function add(key, h, s, j, ns, b)
  local n = tonumber(ns)
  if j > h then
    s = advance(key, h, s, j, b)
    h = j
  end
  if j > h - b and n > 0 then
    redis.call('HINCRBY', key, fld(j), ns)
    s = s + n
  end
  return h, s
end

-- save writes the head and the sum and refreshes the key's TTL (ms).
local function save(key, h, s, ttl)
  redis.call('HSET', key, 'h', fld(h), 's', fld(s))
  redis.call('PEXPIRE', key, ttl)
end

-- merge_one is merge_pairs for one pair (j, n given as the caller's strings), the
-- common case of write-behind: one HMGET, one HSET and the PEXPIRE when the head does not
-- move.
local function merge_one(key, b, ttl, js, ns)
  local j, n = tonumber(js), tonumber(ns)
  local f = fld(j)
  local v = redis.call('HMGET', key, 'h', 's', f)
  local h, s, c = tonumber(v[1]), tonumber(v[2]), tonumber(v[3]) or 0
  if not h then
    h, s = j, 0
  elseif j > h then
    s = advance(key, h, s, j, b)
    h = j
  end
  if j > h - b and n > 0 then
    redis.call('HSET', key, 'h', fld(h), 's', fld(s + n), f, fld(c + n))
  else
    redis.call('HSET', key, 'h', fld(h), 's', fld(s))
  end
  redis.call('PEXPIRE', key, ttl)
end

-- merge_pairs adds the (bucket, count) pairs ARGV[lo], ARGV[lo+1], ..., ARGV[hi-1],
-- ARGV[hi] (hi >= lo + 1) to the counter as leaparray.Store.Merge does, then saves the
-- head and the sum and refreshes the TTL (ttl in ms). Adding the pairs one by one in order
-- ends in the same hash as first moving the head to H = max(head, newest pair) and then
-- adding the pairs newer than H-B: the head only grows, so a pair kept the first way is
-- within (H-B, H], and one dropped is at or before H-B. So this reads the head, the sum
-- and the pairs' buckets in one HMGET, moves the head once (at most B fields read and
-- deleted), and writes the head, the sum and the new bucket counts in one HSET: three
-- commands when the head does not move, whatever the number of pairs. The counts read
-- before the head moves stay right: moving it deletes only buckets at or before H-B,
-- and those are not read. A bucket's new count is computed here, exact up to 2^53 as
-- the sum is. An unknown counter starts with its head at H.
local function merge_pairs(key, b, ttl, lo, hi)
  if hi == lo + 1 then
    return merge_one(key, b, ttl, ARGV[lo], ARGV[hi])
  end
  local top = tonumber(ARGV[lo])
  for i = lo + 2, hi, 2 do
    top = math.max(top, tonumber(ARGV[i]))
  end
  -- the buckets that may count (at most B of them, so unpack stays within Lua's
  -- limits), each once, and what they gain
  local names, js, gain = {}, {}, {}
  for i = lo, hi, 2 do
    local j, n = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
    if j > top - b and n > 0 then
      local f = fld(j)
      if gain[f] then
        gain[f] = gain[f] + n
      else
        names[#names + 1], js[#js + 1], gain[f] = f, j, n
      end
    end
  end
  local v = redis.call('HMGET', key, 'h', 's', unpack(names))
  local h, s = tonumber(v[1]), tonumber(v[2])
  if not h then
    h, s = top, 0
  elseif top > h then
    s = advance(key, h, s, top, b)
    h = top
  end
  local kv = { 'h', '', 's', '' }
  for k, f in ipairs(names) do
    if js[k] > h - b then
      kv[#kv + 1], kv[#kv + 2] = f, fld((tonumber(v[k + 2]) or 0) + gain[f])
      s = s + gain[f]
    end
  end
  kv[2], kv[4] = fld(h), fld(s)
  redis.call('HSET', key, unpack(kv))
  redis.call('PEXPIRE', key, ttl)
end
