// Package fallback keeps sliding-window counters in Redis with exactly the semantics of
// the in-memory leaparray.Store: a node answers from Redis when a counter's owner
// cannot (Doer), an owner writes its counters behind to Redis (FlushDeltas), and a new
// owner reads a counter back (Load).
//
// # Data model
//
// One Redis hash per counter, at the key
//
//	lc:{<tag>}:<windowMs>:<buckets>
//
// with the fields
//
//	h    the head: the newest bucket index ever added to
//	s    the sum of the buckets in (h−B, h]: the count at the head
//	<j>  the count of bucket j (decimal index) for h−B < j ≤ h, only when non-zero
//
// Bucket j covers [j·L, (j+1)·L) ms since the Unix epoch, as everywhere in leapcount. An
// operation at bucket J acts at e = max(J, h), so a clock that steps back never loses a
// count. Moving the head forward subtracts the buckets that leave the window from s and
// deletes their fields in the same step; a jump of a whole window deletes the hash. So
// the hash never holds stale fields and no operation scans for them: incr and an allowed
// allow at the head bucket cost a handful of O(1) hash commands whatever B is, count is
// read-only, and only a denied allow reads the whole (at most B+2 field) hash to compute
// retry_after_ms. Every write refreshes the key's TTL to max(2×window, Config.MinTTL):
// a counter untouched for a window counts 0 anyway, so Redis may forget it after two.
//
// Why not the common "HGETALL, sum the fresh fields, HDEL the stale ones" script (or a
// sorted set of events)? Each request then costs O(B) (or O(events)), while the running
// sum costs O(1) per request plus O(1) per bucket that ever leaves the window.
//
// # Hash tag
//
// The braces are a Redis Cluster hash tag: a counter's hash and its MergeOnce markers
// (lc:{<tag>}:<windowMs>:<buckets>:once:<batchID>) hash to one slot, so one script can
// touch them all. Keys are arbitrary bytes, and a '}' in a key would end the tag early,
// so <tag> is the key itself only when the key is not empty, has no '{' or '}' and does
// not start with '='; otherwise it is '=' followed by the key in lower-case hex. The two
// forms cannot collide, and common keys stay readable in redis-cli
// (lc:{user:42}:60000:10, but lc:{=617b7d}:60000:10 for the key "a{}").
//
// # Scripts
//
// Each operation is one Lua script (lua/*.lua, embedded; lua/common.lua holds the ring
// rules and the merge rule and is prepended to each), so it is atomic: concurrent allows
// never admit past the limit. The scripts are loaded at Open and run with EVALSHA; a
// NOSCRIPT reply (Redis restarted or failed over and forgot them) makes the store load
// them again and rerun the call, which is safe because a NOSCRIPT call did not run. The
// caller passes now: the scripts never read Redis's clock, so answers do not depend on
// the clocks agreeing. Lua numbers are doubles; indexes and counts are exact up to 2^53,
// and the arithmetic that needs int64 (remaining, retry_after_ms) is done in Go.
//
// # Write-behind: many counters per script call
//
// An owner flushes, every interval (100 ms by default), the per-bucket deltas of the
// counters that changed since the last flush: at 100k incr/s over 10k counters, some
// 6.3k deltas per flush. One script call per delta would cost Redis nearly as many
// commands as one per request, so FlushDeltas sends merge_many.lua: one EVALSHA merges
// Config.FlushKeys counters (256 by default), its ARGV holding, per key, B, the TTL, the
// number of pairs and the (bucket, count) pairs. Each counter gets exactly merge.lua's
// rule (both run merge_pairs in common.lua, and tests hold both to leaparray's Merge),
// each within pcall: a counter that fails (a key of the wrong type) fails before it
// writes and alone, and the reply lists a result per key, so FlushError names exactly
// the deltas not applied and the caller retries those. A delta with a BatchID goes alone
// through merge.lua with its MergeOnce marker. Calls are pipelined, FlushChunk counters
// (and at most 16384 buckets) per round trip, so that Redis runs a round trip's scripts
// well within the read timeout: a reply that times out leaves the caller unsure whether
// the deltas were applied. In the scenario above that is 250 EVALSHAs per second
// instead of 100k (BenchmarkWriteBehindCommands).
//
// merge_pairs moves the head once, to the newest bucket given, and then adds the pairs
// that are still in the window, which ends in the same hash as adding them one by one
// (the head only grows). It reads the head, the sum and the buckets to add in one HMGET
// and writes them back in one HSET: with the PEXPIRE, three commands per counter when
// the head does not move.
//
// A Cluster runs a script only on keys of one hash slot, so FlushDeltas groups a
// Cluster's deltas by slot (CRC16 of the hash tag, as Redis computes it). Each counter
// has its own tag (which spreads counters over the masters), so counters share a call
// only when their slots collide (a key's shapes always do): 6.3k counters fall in some
// 5.5k of the 16384 slots, and write-behind to a Cluster saves round trips (one
// pipeline per master) but few commands (BenchmarkWriteBehindCommands/cluster3: 1.8×
// fewer than one per incr). Sharing a call across counters there would take a coarser
// hash tag, which is a change of the key layout.
//
// # Journal: what changed behind an owner's back
//
// When a counter's owner cannot be reached, another node decides its ops on Redis. The
// owner, back, must reload those counters (its own copy missed the ops), so the node
// that decided them appends them to the owner's journal (Journal), a Redis list at
//
//	lc:journal:{<owner tag>}
//
// (the tag as for counter keys), and the owner pops it (TakeJournal, one atomic LPOP
// with a count, Redis 6.2+) and reloads what it names. An entry is
// "<windowMs>:<buckets>:<key>", the key last and as is, so any bytes survive. A push is
// one round trip however many refs it carries (MULTI, RPUSH, PEXPIRE, EXEC), and sets
// the list's TTL to Config.JournalTTL (1 h): the journal of an owner that never comes
// back does not stay.
//
// # Circuit breaker: no request waits on a dead Redis
//
// Each call that cannot reach Redis waits up to the timeouts (200 ms) before it fails.
// So that requests do not each pay that while Redis is down, the store has a breaker:
// Config.BreakerFailures calls in a row that could not reach Redis (connection refused
// or reset, a timeout, a server loading or without its master or cluster) open it; open,
// every call fails at once with an error wrapping ErrRedisDown and
// counter.ErrUnavailable. After Config.BreakerCooldown (1 s) the next call goes to Redis
// as the probe, while the others still fail at once; the probe reaching Redis closes
// the breaker, failing it opens it for another cool-down. Replies that prove Redis is
// there (a script error, WRONGTYPE, NOSCRIPT) count as reaching it, and errors that say
// nothing about Redis (bad input, caught before any I/O; a cancelled context; a call
// cut short by a caller's deadline that came before the store's read timeout) do not
// count at all, so only an unreachable Redis opens it. Healthy reports the state for a
// node's "degraded" flag, and Config.OnStateChange hears each change, outside the
// store's locks. The breaker is one per store: in a Cluster, one dead master among
// answering ones does not open it.
//
// # Hash-field expiry (Redis 7.4+)
//
// The store detects the server version at Open (ServerVersion, HashFieldExpiry) but does
// not use HPEXPIRE: with the running sum, a bucket field must be read when it leaves the
// window anyway (to subtract it from s), so deleting it then costs one HDEL in the same
// step, and there is never a scan for a per-field expiry to save. A field expiring by
// Redis's clock would also make the sum depend on Redis's clock agreeing with the
// caller's, which the store avoids. So the same scripts run on every Redis version (the
// tests run them on the local redis-server).
//
// # Configuration
//
// Config.URL takes one of three forms; short timeouts (200 ms by default) keep any
// request from waiting long on Redis, and go-redis's retries are off (a script whose
// reply was lost may have run; running it again would count twice).
//
//	redis://[user:pass@]host:port/db            one server (also rediss:// for TLS, unix:///path)
//	redis+sentinel://[user:pass@]host:port/db?master=name[&addr=host2:port2...]
//	                                            Sentinel: host:port and each addr are sentinels;
//	                                            user:pass authenticate to the master,
//	                                            sentinel_username / sentinel_password to the sentinels
//	redis+cluster://[user:pass@]host:port[?addr=host2:port2...]
//	                                            Cluster: any of its nodes (database 0 only)
//
// Any of go-redis's URL options may be added as query parameters (dial_timeout=300ms,
// read_timeout=, write_timeout=, pool_size=, ...); they win over Config's fields.
//
// For the README:
//
//	--redis takes a Redis URL. One server: redis://[user:pass@]host:port/db (rediss:// for
//	TLS). Sentinel: redis+sentinel://host:port/db?master=mymaster&addr=host2:port2 (the
//	sentinels; user:pass in the URL is for the master, sentinel_password=... for the
//	sentinels). Cluster: redis+cluster://host:port?addr=host2:port2 (any nodes). Timeouts
//	default to 200 ms; add dial_timeout=, read_timeout=, write_timeout= to change them.
//	Counters are hashes at lc:{<key>}:<windowMs>:<buckets> (a key that is empty, starts
//	with '=' or holds '{' or '}' is written as '=' + hex) with a TTL of twice the window;
//	lc:journal:{<node>} lists the counters other nodes wrote while <node> was away.
//	When Redis stops answering, the node stops asking it for a second at a time and
//	reports itself degraded.
package fallback
