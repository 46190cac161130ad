-- count: the count at bucket max(j, head), in decimal; an unknown counter counts 0.
-- Writes nothing.
-- KEYS[1] the counter. ARGV: j (bucket of now), B.
local key, j, b = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local h, s = state(key)
if not h then
  return '0'
end
return str(count_at(key, h, s, math.max(j, h), b))
