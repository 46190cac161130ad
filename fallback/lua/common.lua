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
