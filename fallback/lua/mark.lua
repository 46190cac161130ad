-- mark: KEYS[1] a writer's high-water mark in a hash slot (merge_many.lua), ARGV[1] its
-- TTL (ms). Returns the mark, 0 when it is gone. A mark found gets its TTL refreshed: a
-- write, so that a WAIT after this call covers the call that set it, whichever
-- connection ran it (fallback/replicas.go): a reader that acts on the mark (a fence
-- reached) must know that the marked call survives a failover.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return tonumber(v)
