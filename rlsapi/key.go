package rlsapi

import (
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/leapcount/leapcount/limits"
)

// CounterKey is the key of the counter that a descriptor's limit counts in:
//
//	rls:<domain>:<key>=<value>,<key>=<value>...[#<limit>]
//
// with the domain, keys and values percent-escaped where they hold ':', ',', '=',
// '#', '%' or bytes outside printable ASCII, and #<limit> for a rule's second and
// later limits. A key longer than maxKey is rls:h:<xxhash64 of that key, hex>. The
// format is stable across releases: a cluster upgraded in place keeps its counts.
// Each distinct value counts apart, as in envoyproxy/ratelimit; a wildcard value with
// share_threshold counts as its pattern, shared by every value it matches.
func CounterKey(domain string, entries []limits.Entry, shared []string, limit, maxKey int) string {
	var b strings.Builder
	// Grown once to its length unescaped (BenchmarkDecide).
	n := len("rls:") + len(domain) + len(":") + len("#00")
	for i, e := range entries {
		n += len(e.Key) + len("=,") + len(e.Value)
		if i < len(shared) {
			n += len(shared[i])
		}
	}
	b.Grow(n)
	b.WriteString("rls:")
	escape(&b, domain)
	b.WriteByte(':')
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		escape(&b, e.Key)
		b.WriteByte('=')
		if i < len(shared) && shared[i] != "" {
			escape(&b, shared[i])
		} else {
			escape(&b, e.Value)
		}
	}
	if limit > 0 {
		b.WriteByte('#')
		b.WriteString(strconv.Itoa(limit))
	}
	if b.Len() > maxKey {
		return "rls:h:" + strconv.FormatUint(xxhash.Sum64String(b.String()), 16)
	}
	return b.String()
}

const hexDigits = "0123456789ABCDEF"

func escape(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c <= ' ' || c >= 0x7f || c == ':' || c == ',' || c == '=' || c == '#' || c == '%':
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		default:
			b.WriteByte(c)
		}
	}
}
