-- late: KEYS[1] the hash of late-write marks (field: a ring partition, value: how many
-- late writes of it were marked; field "seq": all marks so far); ARGV the partitions.
-- A writer marks a partition after Redis confirmed deltas of it that it wrote once its
-- lease had ended: whoever holds the partition now may have loaded (or skipped loading)
-- its counters before them, and reloads them when it sees the mark. Returns "seq".
for i = 1, #ARGV do
  redis.call('HINCRBY', KEYS[1], ARGV[i], 1)
end
return redis.call('HINCRBY', KEYS[1], 'seq', 1)
