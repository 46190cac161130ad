// Package hotkeys keeps the keys a node decides most often lately: a space-saving
// sketch (Metwally, Agrawal and El Abbadi, "Efficient Computation of Frequent and Top-k
// Elements in Data Streams", 2005) of a fixed number of keys over a sample of the ops,
// in two periods, so that the top keys are those of the last one or two periods, not
// of the node's whole life.
//
// Observe is on every op's path, so it costs almost nothing when an op is not
// sampled (one call of the runtime's per-thread random source) and O(1) when it is
// (the stream summary: counts in a list of buckets, a key moved to the next one).
// The counts are estimates: sampled ops times the sampling interval. Each key comes
// with the range its true ops lie in (Low, High: 99% confidence), which covers the
// sampling's error and the sketch's overestimate both (bounds.go). Like leaparray, it never reads the clock: now is
// passed in.
package hotkeys
