-- reset: forget the counter; 1 if it existed, else 0. KEYS[1] the counter.
-- (A single DEL is atomic on its own; it is a script so that every operation goes
-- through the same pipelined EVALSHA path.)
return redis.call('DEL', KEYS[1])
