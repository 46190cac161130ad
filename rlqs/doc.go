// Package rlqs is Envoy's Rate Limit Quota Service (RLQS,
// envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas) over
// the rules of --limits: each Envoy reports its usage of its buckets every reporting
// interval, and is sent for each an assignment that its rate_limit_quota filter
// enforces locally, so that most requests never leave the Envoy.
//
// # Buckets and rules
//
// A bucket_id's map, its entries ordered by key, is a descriptor of the stream's
// domain: {"name": "api", "tenant": "acme"} selects the rule that the ShouldRateLimit
// descriptor [name=api, tenant=acme] would. A bucket with no rule, an unlimited rule
// or a shadow_mode one is sent ALLOW_ALL; a limit of zero, DENY_ALL; a bucket whose
// rule was removed since it was last assigned, abandon_action. Every other bucket gets
// a token bucket.
//
// # Never past the limit: the ledger
//
// Each limit of a bucket's rule has a ledger: a counter of the cluster like any other
// (on its owner, written behind to Redis, handed on when ownership moves), whose
// window is the limit's lengthened by twice an assignment's life and a bucket. An
// assignment's life is its time to live plus Config.Delivery, how late it may reach its
// Envoy: the longest it may admit after it was sent. Before a token bucket is sent,
// what it may admit is added to every ledger by an allow of the limit, and it is sent
// only if each admits it:
//
//   - a new bucket may admit max_tokens (it arrives full) plus its rate over its life;
//   - a bucket sent again, unchanged while Envoy still holds it, keeps its tokens in
//     Envoy (the filter keeps a bucket it is sent again), so only its rate over the
//     time since it was last sent is added: the time by which its life moved on;
//   - a bucket replaced while live leaves what was paid for its life to come unspent,
//     and that pays for its successor first.
//
// Every admission an Envoy makes falls within the life of a bucket some ledger entry
// paid for: a bucket's first fill and its refill up to the end of its life, paid when
// it was sent or renewed at most a life before the admission (or, for the tokens a
// bucket saved, at most a fill interval, itself at most a life, before that). So the
// admissions in any window of the limit's length were all paid within that window
// lengthened by two lives, which is what the ledger counts: the fleet never admits more
// than the limit in any window, whatever the shares, the streams' nodes, or the
// reconnections, as long as assignments reach their Envoys within Config.Delivery and
// the ledger's counter keeps its counts (an owner's crash loses what it had not
// written to Redis, as every count; see guarantees.md).
//
// The price is paid ahead: a bucket's Envoys share a rate of the limit over the
// ledger's window and one more life and a second (the room for buckets that change),
// so a minute's limit with the default 5 s time to live and 1 s delivery is shared at
// about 70% of its rate, and a limit whose window is short against an assignment's
// life at much less: those are for ShouldRateLimit.
//
// # Fair shares
//
// The rate is split max-min fairly by the demands the Envoys report (allowed and
// denied, smoothed over reports), computed on the ledger's owner, where every stream's
// demand meets (package fairshare). A bucket is changed only when its share moves by
// more than a twentieth or a token a second: every new bucket arrives full, a burst
// that is paid again.
package rlqs
