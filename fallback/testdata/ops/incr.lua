-- incr: add n at bucket max(j, head) and return the count after adding, in decimal. A
-- count past 2^63-1 fails before anything is written.
-- KEYS[1] the counter. ARGV: j (bucket of now), n (>= 0), B, ttl (ms).
local key = KEYS[1]
local h, e, c, mv, v = at(key, tonumber(ARGV[1]), tonumber(ARGV[3]))
return str(add_at(key, h, c, e, mv, v, ARGV[2], ARGV[4]))
