-- allow: at bucket e = max(j, head), add n if count + n <= limit.
-- KEYS[1] the counter. ARGV: j (bucket of now), room (limit - n, in decimal, computed
-- exactly by the caller; -1 when n > limit), n (>= 0), B, ttl (ms).
-- Returns {allowed (1/0), count after the decision (decimal), e, k}: k is 0 when
-- allowed, -1 when n > limit (never allowed), else the number of buckets after e until
-- enough of the current ones have left the window (the caller turns it into
-- (e+k)*L - now ms). A denied allow on an unknown counter does not create it; a denied
-- allow writes nothing. Allowed means count <= room, compared exactly (see common.lua).

-- leaves is the smallest k >= 1 such that once bucket e+k starts, the count minus the
-- buckets that left (those <= e-B+k) is within room.
local function leaves(key, e, b, c, room)
  local all = redis.call('HGETALL', key)
  local bs = {}
  for i = 1, #all, 2 do
    local j = tonumber(all[i])
    if j and j > e - b then
      bs[#bs + 1] = { j, num(all[i + 1]) }
    end
  end
  table.sort(bs, function(x, y) return x[1] < y[1] end)
  for _, bk in ipairs(bs) do
    c = minus(c, bk[2])
    if le(c, room) then
      return bk[1] - (e - b)
    end
  end
  return b
end

local key, b = KEYS[1], tonumber(ARGV[4])
local h, e, c, mv, v = at(key, tonumber(ARGV[1]), b)
if ARGV[2] == '-1' then
  return { 0, str(c), e, -1 }
end
local room = num(ARGV[2])
if le(c, room) then
  return { 1, str(add_at(key, h, c, e, mv, v, ARGV[3], ARGV[5])), e, 0 }
end
return { 0, str(c), e, leaves(key, e, b, c, room) }
