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
// rules and is prepended to each), so it is atomic: concurrent allows never admit past
// the limit. The scripts are loaded at Open and run with EVALSHA; a NOSCRIPT reply (Redis
// restarted or failed over and forgot them) makes the store load them again and rerun
// the call, which is safe because a NOSCRIPT call did not run. The caller passes now: the
// scripts never read Redis's clock, so answers do not depend on the clocks agreeing. Lua
// numbers are doubles; indexes and counts are exact up to 2^53, and the arithmetic that
// needs int64 (remaining, retry_after_ms) is done in Go.
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
//	with '=' or holds '{' or '}' is written as '=' + hex) with a TTL of twice the window.
package fallback
