-- allow: at bucket e = max(j, head), add n if count + n <= limit.
-- KEYS[1] the counter. ARGV: j (bucket of now), limit (>= 0), n (>= 0), B, ttl (ms).
-- Returns {allowed (1/0), count after the decision, e, k}: k is 0 when allowed, -1 when
-- n > limit (never allowed), else the number of buckets after e until enough of the
-- current ones have left the window (the caller turns it into (e+k)*L - now ms).
-- A denied allow on an unknown counter does not create it; a denied allow writes nothing.

-- leaves is the smallest k >= 1 such that once bucket e+k starts, the count minus the
-- buckets that left (those <= e-B+k) plus n is within limit.
local function leaves(key, e, b, c, n, limit)
  local all = redis.call('HGETALL', key)
  local bs = {}
  for i = 1, #all, 2 do
    local j = tonumber(all[i])
    if j and j > e - b then
      bs[#bs + 1] = { j, tonumber(all[i + 1]) }
    end
  end
  table.sort(bs, function(x, y) return x[1] < y[1] end)
  for _, bk in ipairs(bs) do
    c = c - bk[2]
    if c + n <= limit then
      return bk[1] - (e - b)
    end
  end
  return b
end

local key = KEYS[1]
local j, limit, n, b = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local h, s = state(key)
if not h then
  if n > limit then
    return { 0, 0, j, -1 }
  end
  h = j
end
local e = math.max(j, h)
local c = count_at(key, h, s, e, b)
if c + n <= limit then
  h, s = add(key, h, s, e, ARGV[3], b)
  save(key, h, s, ARGV[5])
  return { 1, s, e, 0 }
end
if n > limit then
  return { 0, c, e, -1 }
end
return { 0, c, e, leaves(key, e, b, c, n, limit) }
