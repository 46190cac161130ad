// Package limits reads rate limit rules in the YAML of envoyproxy/ratelimit (domains,
// nested descriptors of key and value, wildcards, rate_limit with unit and
// requests_per_unit, unlimited, name, replaces, shadow_mode, detailed_metric,
// value_to_metric, share_threshold, metadata), strictly: an unknown field, a field in
// the wrong place or a bad value is an error that names the file and line. It adds
// leapcount's extensions to a rate_limit: buckets (how finely its window slides) and
// window (any length, for what unit cannot say), and rate_limits, a list of limits for
// one descriptor (a burst and a sustained rate, say).
//
// Rules finds the rule of a request's descriptor as envoyproxy/ratelimit does: at each
// level the entry's key and value, else a wildcard value (first in the file's order),
// else the key alone; a rule counts only at the descriptor's last entry.
//
// The package is pure: it reads bytes and files it is given, and keeps no state but the
// rules it returned.
package limits
