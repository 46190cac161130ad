-- probe: a write that changes nothing leapcount reads, so that its WAIT tells whether
-- the replicas follow again (fallback/replicas.go ProbeReplicas). KEYS[1] the probe key,
-- ARGV[1] the writer's time (ms), ARGV[2] its TTL (ms).
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
