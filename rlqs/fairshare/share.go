// Package fairshare splits a bucket's capacity max-min fairly among the RLQS streams
// that report it. A bucket's Envoys may stream to any node, so the shares are computed
// where all their demands meet: on the node that owns the bucket's ledger, as its
// counter is (the node wires a Sharer that asks it over rpc, in this package's wire
// encoding). A share is only advice: what an assignment may admit is paid for in the
// ledger whatever the share, so a share computed from a partial view (an owner that
// moved, a member of an older release) costs fairness for a while, never the limit.
package fairshare

import (
	"context"
	"encoding/binary"
	"math"
	"sync"
	"time"

	"github.com/leapcount/leapcount/internal/wire"
)

// Request is one stream's demand for a bucket, and the bucket's capacity.
type Request struct {
	Bucket   string  // the bucket's first ledger key: one name cluster-wide
	Stream   string  // the stream, unique cluster-wide (its node's name and its id)
	Demand   float64 // requests a second its Envoy reported
	Capacity float64 // tokens a second the bucket's Envoys share
}

// A Sharer answers a stream's fair share of its bucket (Demands.Share, where the
// bucket's demands are kept).
type Sharer interface {
	Share(ctx context.Context, req Request) (float64, error)
}

// Demands are the latest demands reported for each bucket, by stream.
type Demands struct {
	mu    sync.Mutex
	m     map[string]map[string]demand // by bucket, then stream
	stale time.Duration
	now   func() time.Time
	swept time.Time
}

type demand struct {
	rate float64
	seen time.Time
}

// NewDemands keeps demands for stale after they were reported (the streams' reports
// renew them; a stream that ended is forgotten so).
func New(stale time.Duration, now func() time.Time) *Demands {
	if now == nil {
		now = time.Now
	}
	return &Demands{m: map[string]map[string]demand{}, stale: stale, now: now}
}

// Share records req's demand and returns its max-min fair share of req.Capacity among
// the streams that reported the bucket lately.
func (d *Demands) Share(req Request) float64 {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if now.Sub(d.swept) > d.stale {
		d.sweep(now) // buckets no longer reported, once a stale period: amortized
	}
	byStream := d.m[req.Bucket]
	if byStream == nil {
		byStream = map[string]demand{}
		d.m[req.Bucket] = byStream
	}
	byStream[req.Stream] = demand{rate: req.Demand, seen: now}
	rates := make([]float64, 0, len(byStream))
	mine := 0
	for s, dm := range byStream {
		if now.Sub(dm.seen) > d.stale {
			delete(byStream, s)
			continue
		}
		if s == req.Stream {
			mine = len(rates)
		}
		rates = append(rates, dm.rate)
	}
	return maxMinFair(rates, req.Capacity)[mine]
}

// sweep forgets the demands not reported within stale; d.mu is held.
func (d *Demands) sweep(now time.Time) {
	d.swept = now
	for b, byStream := range d.m {
		for s, dm := range byStream {
			if now.Sub(dm.seen) > d.stale {
				delete(byStream, s)
			}
		}
		if len(byStream) == 0 {
			delete(d.m, b)
		}
	}
}

// Len is how many buckets have demands.
func (d *Demands) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.m)
}

// The wire of a share (a message of its own kind, rpc.KindQuotaShare, sent only to
// members that advertise it): the request is string bucket | string stream | u64
// demand | u64 capacity, the floats as their IEEE 754 bits, little-endian; the answer
// is u64 share. Every field is required, and a string is at most MaxKeyBytes.

// Bounds of the wire.
const (
	MaxKeyBytes = 1 << 20 // a bucket's key, as long as a node takes
	// MaxRequestBytes bounds a request's frame (its length prefix and type included).
	MaxRequestBytes = 2*MaxKeyBytes + 64
	maxRate         = 1e15 // tokens a second past any limit a counter holds
)

// AppendRequest appends req.
func AppendRequest(b []byte, req Request) []byte {
	b = wire.AppendString(b, req.Bucket)
	b = wire.AppendString(b, req.Stream)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(req.Demand))
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(req.Capacity))
}

// ReadRequest reads a request; the decoder's error says if it was malformed.
func ReadRequest(d *wire.Decoder) Request {
	var req Request
	bucket, stream := d.Bytes("bucket"), d.Bytes("stream")
	if len(bucket) > MaxKeyBytes || len(stream) > MaxKeyBytes {
		d.Fail("bucket or stream")
	}
	req.Bucket, req.Stream = string(bucket), string(stream)
	req.Demand, req.Capacity = readRate(d, "demand"), readRate(d, "capacity")
	return req
}

// AppendShare appends an answer.
func AppendShare(b []byte, share float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(share))
}

// ReadShare reads an answer.
func ReadShare(d *wire.Decoder) float64 { return readRate(d, "share") }

// readRate reads a rate: finite, from 0 to maxRate.
func readRate(d *wire.Decoder, what string) float64 {
	var u [8]byte
	for i := range u {
		u[i] = d.Byte(what)
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(u[:]))
	if !(v >= 0 && v <= maxRate) { // NaN fails both
		d.Fail(what)
		return 0
	}
	return v
}
