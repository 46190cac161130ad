package fallback

import (
	"encoding/hex"
	"strconv"
	"strings"
	"sync"

	"github.com/leapcount/leapcount/hashslot"
	"github.com/leapcount/leapcount/leaparray"
)

// counterKey is the Redis key of a counter: lc:{<tag>}:<windowMs>:<buckets>. It is
// built in a buffer on the stack and copied once, at its own size: a key flood's
// write-behind makes one per counter (BenchmarkNewBatch).
func counterKey(key string, sp leaparray.Spec) string {
	var buf [96]byte
	b := append(buf[:0], "lc:{"...)
	b = append(b, tag(key)...)
	b = append(b, "}:"...)
	b = strconv.AppendInt(b, sp.WindowMs, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(sp.Buckets), 10)
	return string(b)
}

// writerKey is a writer's high-water mark in one hash slot: lc:{<tag>}:w:<writer>,
// where tag is slotTag(slot) in a Cluster and oneServerTag otherwise (see Batch). The
// third part, "w", is never a window, so it cannot be a counter's key.
func writerKey(tag, writer string) string {
	return "lc:{" + tag + "}:w:" + writer
}

// probeKey is where ProbeReplicas writes, in the slot of tag: lc:{<tag>}:probe, never
// a counter's key (its third part is no window).
func probeKey(tag string) string { return "lc:{" + tag + "}:probe" }

// oneServerTag is the hash tag of the writer keys on one server (or Sentinel): every
// call of a writer shares its one key.
const oneServerTag = "w"

// slotTag is a short hash tag whose slot is slot (in [0, 16384)): the first string in
// the base-36 numbers 0, 1, 2, ... that hashes there. A writer's calls to one slot
// share its key whatever counters they carry, so a writer holds one key per slot.
func slotTag(slot uint16) string { return slotTags()[slot] }

var slotTags = sync.OnceValue(func() []string {
	tags := make([]string, 16384)
	for i, left := uint64(0), len(tags); left > 0; i++ { // 87,573 tries, a few ms, once
		t := strconv.FormatUint(i, 36)
		if s := hashslot.Of(t); tags[s] == "" {
			tags[s] = t
			left--
		}
	}
	return tags
})

// tag is what goes between the braces: the key itself when that is safe, else "=" and
// the key in hex. The key itself is safe when it is not empty, has no brace (a '}' would
// end the hash tag early, a '{' would make it ambiguous to read) and does not start with
// '=' (which marks the encoded form, so the two forms never collide).
func tag(key string) string {
	if key != "" && !strings.ContainsAny(key, "{}") && key[0] != '=' {
		return key
	}
	return "=" + hex.EncodeToString([]byte(key))
}
