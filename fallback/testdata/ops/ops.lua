-- ops.lua follows common.lua in the per-operation scripts of package fallback's tests
-- (incr, count, allow, reset: ops_test.go builds each as common.lua, this file, then
-- the operation's own): the reference the tests hold Redis's counters to leaparray.Store
-- with, one call per operation. Production writes only through merge_many.

-- count_at is the count at bucket e >= h.
local function count_at(key, h, s, e, b)
  return (ahead(key, h, s, e, b))
end

-- add_at adds n (ns, a decimal string) at bucket e of the counter whose head is h (nil:
-- new) and whose count at e is c (mv: the move, from ahead; v: bucket e's count, or nil
-- when not read), and returns the new count.
local function add_at(key, h, c, e, mv, v, ns, ttl)
  local n = num(ns)
  local total = plus(c, n)
  overflow(total)
  local kv = {}
  if ns ~= '0' then
    if not v then
      v = num(redis.call('HGET', key, fld(e)))
    end
    kv[1], kv[2] = fld(e), str(plus(v, n))
  end
  put(key, h, e, mv, total, kv, ttl)
  return total
end

-- at reads the counter and returns its head (nil: new), the bucket e = max(j, head) an
-- operation at bucket j acts at, the count there, the move to it, and bucket e's count
-- (read with the head when e is j; nil when e is the head, past j: add_at reads it).
local function at(key, j, b)
  local v = redis.call('HMGET', key, 'h', 's', fld(j))
  local h, s, e, bv = tonumber(v[1]), num(v[2]), j, num(v[3])
  if h and h > j then
    e, bv = h, nil
  end
  local c, mv = ahead(key, h or e, s, e, b)
  return h, e, c, mv, bv
end
