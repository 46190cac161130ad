package fallback

import (
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/leapcount/leapcount/leaparray"
)

// counterKey is the Redis key of a counter: lc:{<tag>}:<windowMs>:<buckets>.
func counterKey(key string, sp leaparray.Spec) string {
	var b strings.Builder
	t := tag(key)
	b.Grow(len(t) + 32)
	b.WriteString("lc:{")
	b.WriteString(t)
	b.WriteString("}:")
	b.WriteString(strconv.FormatInt(sp.WindowMs, 10))
	b.WriteByte(':')
	b.WriteString(strconv.Itoa(sp.Buckets))
	return b.String()
}

// onceKey is the marker of one MergeOnce batch on a counter. It shares the counter's
// hash tag, so both keys live in one Cluster slot and one script may touch both.
func onceKey(counterKey, batchID string) string {
	return counterKey + ":once:" + batchID
}

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
