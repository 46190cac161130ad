// Package fallback is leapcount's Redis store, used both as the fallback and as the
// persistence path of counters (which is why the packages that use it call it redis).
// It keeps sliding-window counters in Redis with exactly the semantics of the in-memory
// leaparray.Store: an owner writes its counters behind to Redis (NewBatch, SendBatch),
// and a new owner reads counters back (LoadMany). The package's tests hold the rules to
// leaparray's with per-operation scripts of their own (testdata/ops: incr, count, allow
// and reset, on the same rules, and Merge and Load for one counter), which are also the
// baseline the benchmarks compare write-behind with.
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
// the hash never holds stale fields and no operation scans for them: a write at the head
// bucket costs a handful of O(1) hash commands whatever B is (as do the tests' incr and
// an allowed allow; their count is read-only, and only a denied allow reads the whole,
// at most B+2 field, hash to compute retry_after_ms). Every write that moves the head
// (or makes the counter) sets the key's TTL to max(2×window, Config.MinTTL): a counter
// whose head bucket a window has passed counts 0 anyway, so Redis may forget it after
// two. Writes at or behind the head leave the TTL alone, which saves write-behind a
// command per counter per flush (see put in common.lua).
//
// Why not the common "HGETALL, sum the fresh fields, HDEL the stale ones" script (or a
// sorted set of events)? Each request then costs O(B) (or O(events)), while the running
// sum costs O(1) per request plus O(1) per bucket that ever leaves the window.
//
// # Hash tag
//
// The braces are a Redis Cluster hash tag: a counter's hash hashes to the slot of its
// tag, and a script may touch only keys of one slot (a batch call's writer key has a tag
// of the call's slot; see below). Keys are arbitrary bytes, and a '}' in a key
// would end the tag early, so <tag> is the key itself only when the key is not empty,
// has no '{' or '}' and does not start with '='; otherwise it is '=' followed by the key
// in lower-case hex. The two forms cannot collide, and common keys stay readable in
// redis-cli (lc:{user:42}:60000:10, but lc:{=617b7d}:60000:10 for the key "a{}").
//
// # Scripts
//
// Each operation is one Lua script (lua/*.lua, embedded; lua/common.lua holds the ring
// rules and the merge rule and is prepended to merge_many), so it is atomic: no other
// command runs between its reads and its writes. The scripts are loaded at Open and run
// with EVALSHA; a NOSCRIPT reply (Redis restarted or failed over and forgot them) makes the store load
// them again and rerun the call, which is safe because a NOSCRIPT call did not run. The
// caller passes now: the scripts never read Redis's clock, so answers do not depend on
// the clocks agreeing.
//
// # Exact counts
//
// Counts go up to 2^63−1 (limits to 2^62), and Lua's numbers are doubles, exact only to
// 2^53. So a script holds a count in a Lua number only while it is below 2^53 (nearly
// always); a larger one is read from Redis's decimal string into two exact parts (x =
// hi·10^9 + lo), and sums and comparisons go to that form whenever a number would not be
// exact. New counts are computed so in the script and written as decimal strings (one
// HSET per counter), and answered as decimal strings. The tests' allow gets limit − n
// from Go, computed in int64, and compares the count with it. A write whose count would
// pass 2^63−1 fails before it writes. Bucket indexes stay Lua numbers: exact to 2^53, a
// clock 285,000 years away. What needs int64 besides (the tests' remaining and
// retry_after_ms) is done in Go.
//
// # Write-behind: many counters per script call, each applied at most once
//
// An owner flushes, every interval (100 ms by default), the per-bucket deltas of the
// counters that changed since the last flush; over many counters, most increments of a
// flush touch a counter of their own. One script call per delta would cost Redis nearly
// as many commands as one per request, so a Batch (NewBatch) cuts the deltas into
// merge_many.lua calls of Config.FlushKeys deltas (256 by default), its ARGV holding,
// per delta, the reset flag, B, the TTL, the number of pairs and the (bucket, count)
// pairs. Each counter gets exactly leaparray.Store.Merge's rule (tests hold it to leaparray's
// TryReset and Merge), within pcall: a counter that fails (a key of the wrong type) fails before
// it writes and alone, and the reply lists a result per counter. A delta with Reset
// deletes the counter's hash and then merges its buckets, in the same call, so a reset
// is ordered with the adds around it; a counter's deltas all go in one call, in order.
// A reset may carry a deadline on Redis's clock (Delta.ResetBy, its writer's lease's
// end): a call that runs later merges its buckets without the reset, and says so
// (Batch.LateResets); every reply carries Redis's TIME, which writers measure
// deadlines from (Batch.RedisTime).
// SendBatch pipelines the calls, FlushChunk deltas (and at most 16384 buckets) per
// round trip, so that Redis runs a round trip's scripts well within the read timeout.
// BenchmarkWriteBehindCommands counts the EVALSHAs this takes against one per request.
//
// At most once. A call whose reply was lost (a timeout) may have run, and go-redis's
// Cluster client even sends a pipeline again by itself after a timeout or a redirect; a
// merge sent twice would count twice. So each call has a seq, from a counter of the
// Store, and names its writer (NewBatch's writer: a node's name and run), and its script
// first reads the writer's high-water mark in the call's slot, the key
//
//	lc:{<slot tag>}:w:<writer>
//
// holding the highest seq of the writer's calls applied in that slot. <slot tag> is, in
// a Cluster, a short tag that hashes to the call's slot (slotTag: the first base-36
// number that does), so all of a writer's calls to a slot share one key whatever
// counters they carry; on one server it is "w", one key per writer. A call whose seq is
// not above the mark answers "already applied" and changes nothing; else its first
// write sets the mark to its seq (PX OnceTTL, so every write refreshes it) and it runs
// to the end. SendBatch sends again exactly the calls not yet confirmed, so a call sent
// any number of times applies once. A call that certainly never ran (refused by the open
// breaker, no connection to Redis, a NOSCRIPT or a "behind" reply, below) is unsent: TakeUnsent hands its
// deltas back, to be written another way. One that was sent and not answered is in
// doubt: only sending it again can tell. (With a Cluster client every failure after the
// call was handed to go-redis counts as in doubt: the client may have written it in an
// earlier attempt of its own.)
//
// A mark is right only if no call passes an earlier call of its writer and slot that is
// still to apply: that one would then be skipped as applied. Between batches the writer
// sees to it: it makes its batches and sends them one at a time, in order, and sends
// nothing newer while a batch is not confirmed (the owner's write-behind does: it sends
// an unconfirmed batch again, same calls, same seqs, before anything else), so a higher
// seq is only ever sent after every lower one of the writer was confirmed (applied, or
// taken back unsent), or with them in one SendBatch. Within a SendBatch, calls of one
// slot go in seq order, but one may fail inside Redis as a whole (OOM, BUSY, LOADING, a
// NOSCRIPT when another client loaded the scripts in between) while a later one, in the
// same pipeline or round trip, would run. So each call also names the seq of the call
// before it of its writer key that is not confirmed when the send starts (0 if none),
// and runs only once the mark has reached that seq; else it answers "behind" (errBehind)
// without writing, and is sent again with the batch. The calls of a key thus apply in
// seq order, each at most once, whatever fails in between; a call whose predecessor was
// confirmed does not wait, so a mark that expired (below) never blocks a batch.
//
// The cost and the limit. A mark is one small string key, alive for Config.OnceTTL (1
// hour) after the writer's last call to its slot. So a server holds one key per writer
// run in the last hour, whatever the traffic; a Cluster one per writer and slot written
// in the last hour, at most 16384 per writer, where a key per call would grow with the
// traffic. A call in doubt for longer than OnceTTL (Redis kept it unanswered, or the
// writer did not send it again in time) may have lost its mark, and sending it then
// could apply it twice: a writer must not send again a call whose writer and slot saw
// no write for OnceTTL (its counters' state in Redis is then unknown and is to be
// rebuilt from memory).
//
// merge_pairs moves the head once, to the newest bucket given, and then adds the pairs
// that are still in the window, which ends in the same hash as adding them one by one
// (the head only grows). It reads the head, the sum and the buckets it adds to in one
// HMGET and writes the new sum and bucket counts in one HSET: two commands per counter
// when the head does not move, however many buckets its delta holds, and a PEXPIRE more
// when it does (BenchmarkFlushDeltas reports redis-cmds/delta). A call whose counters
// Redis holds none of (a key flood's: one EXISTS of its first counter, then one of the
// rest) reads none of them: a new counter costs an HSET and a PEXPIRE.
//
// A Cluster runs a script only on keys of one hash slot, so NewBatch groups a Cluster's
// deltas by slot (CRC16 of the hash tag, as Redis computes it). Each counter has its
// own tag (which spreads counters over the masters), so counters share a call only when
// their slots collide (a key's shapes always do), and few do: write-behind to a Cluster
// saves round trips (one pipeline per master) but few commands
// (BenchmarkWriteBehindCommands/cluster3). Sharing a call across counters there would
// take a coarser hash tag, which is a change of the key layout.
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
// reply was lost may have run; running it again would count twice). The Cluster client
// still sends a pipeline again after a timeout; batches are safe from that (the writer's
// high-water marks).
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
// For the docs (docs/redis.md):
//
//	--redis takes a Redis URL. One server: redis://[user:pass@]host:port/db (rediss:// for
//	TLS). Sentinel: redis+sentinel://host:port/db?master=mymaster&addr=host2:port2 (the
//	sentinels; user:pass in the URL is for the master, sentinel_password=... for the
//	sentinels). Cluster: redis+cluster://host:port?addr=host2:port2 (any nodes). Timeouts
//	default to 200 ms; add dial_timeout=, read_timeout=, write_timeout= to change them.
//	Counters are hashes at lc:{<key>}:<windowMs>:<buckets> (a key that is empty, starts
//	with '=' or holds '{' or '}' is written as '=' + hex) with a TTL of twice the window;
//	lc:{<tag>}:w:<node>.<run> holds how far that node run's write-behind got (an hour).
//	When Redis stops answering, the node stops asking it for a second at a time and
//	reports itself degraded.
package fallback
