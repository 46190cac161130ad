-- incr: add n at bucket max(j, head) and return the count after adding.
-- KEYS[1] the counter. ARGV: j (bucket of now), n (>= 0), B, ttl (ms).
local key, j, b = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[3])
local h, s = state(key)
if not h then
  h = j
end
h, s = add(key, h, s, math.max(j, h), ARGV[2], b)
save(key, h, s, ARGV[4])
return s
