package rlqs

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"

	"github.com/leapcount/leapcount/counter"
	"github.com/leapcount/leapcount/limits"
	"github.com/leapcount/leapcount/rlsapi"
)

// Bounds on what a client may send.
const (
	maxBucketEntries = 64    // entries of one bucket_id
	maxEntryBytes    = 1024  // a key or value of one
	maxStreamBuckets = 10000 // buckets one stream reports
)

var (
	errNoBucketID = errors.New("a bucket_quota_usage without bucket_id entries")
	errBigBucket  = fmt.Errorf("a bucket_id of more than %d entries, or an entry over %d bytes", maxBucketEntries, maxEntryBytes)
)

// entriesOf is a bucket_id as a descriptor's entries: its map's entries ordered by key.
// A bucket {"name": "api", "tenant": "acme"} selects the rule that a ShouldRateLimit
// descriptor [name=api, tenant=acme] would, in the stream's domain.
func entriesOf(id *rlqspb.BucketId) ([]limits.Entry, error) {
	m := id.GetBucket()
	if len(m) == 0 {
		return nil, errNoBucketID
	}
	if len(m) > maxBucketEntries {
		return nil, errBigBucket
	}
	out := make([]limits.Entry, 0, len(m))
	for k, v := range m {
		if len(k) > maxEntryBytes || len(v) > maxEntryBytes {
			return nil, errBigBucket
		}
		out = append(out, limits.Entry{Key: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// bucketName is a bucket's identity within a stream (its entries, in order).
func bucketName(entries []limits.Entry) string {
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e.Key)
		b.WriteByte(0)
		b.WriteString(e.Value)
		b.WriteByte(0)
	}
	return b.String()
}

// ledger is one limit of a bucket's rule as the counter of its assignments: every
// assignment adds what it lets an Envoy admit (tokenBucket.potential) to it before it
// is sent, and is sent only if the sum stays within the limit. The counter's window is
// the limit's, lengthened by twice the assignments' longest life (Config.life) and a
// bucket: every admission falls within the life of an assignment that some add within
// the lengthened window paid for (doc.go has the argument).
type ledger struct {
	key     string
	limit   int64
	window  time.Duration // the limit's own
	counted time.Duration // the counter's: window + 2 lives + a bucket
	buckets int
}

// ledgerOf is limit j of a rule matched by entries in domain.
func ledgerOf(domain string, entries []limits.Entry, shared []string, j int, l limits.Limit, defaultBuckets, maxKey int, life time.Duration) (ledger, error) {
	b := l.Buckets
	if b <= 0 {
		b = defaultBuckets
	}
	step := l.Window / time.Duration(b)
	if step < time.Millisecond {
		step = time.Millisecond
	}
	n := int((l.Window+2*life+step-1)/step) + 1
	for n > counter.MaxBuckets { // coarser steps for a long life against a short step
		step *= 2
		n = int((l.Window+2*life+step-1)/step) + 1
	}
	lg := ledger{
		key:     "rlqs:" + strings.TrimPrefix(rlsapi.CounterKey(domain, entries, shared, j, maxKey-len("rlqs:")+len("rls:")), "rls:"),
		limit:   int64(l.RequestsPerUnit),
		window:  l.Window,
		counted: step * time.Duration(n),
		buckets: n,
	}
	return lg, counter.ValidateSpec(lg.counted.Milliseconds(), n)
}

// capacity is the rate the Envoys of a bucket may share so that their assignments,
// renewed as they run, fit the ledger with room to spare for new ones: renewals hold
// the rate over the counter's window; every bucket's first fill is a second's worth;
// and a bucket replaced pays again for the life and the fill its predecessor had paid
// for, twice over room to replace them all at once.
func (lg ledger) capacity(life time.Duration) float64 {
	return float64(lg.limit) / (lg.counted + life + time.Second).Seconds()
}

// op reserves n in lg.
func (lg ledger) op(n int64) counter.Op {
	return counter.Op{Kind: counter.Allow, Key: lg.key, Window: lg.counted.Milliseconds(), Buckets: lg.buckets, N: n, Limit: lg.limit}
}
