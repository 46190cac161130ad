// Package xdsconfig takes rate limit rules from an xDS management server, as
// envoyproxy/ratelimit does with CONFIG_TYPE=GRPC_XDS_SOTW: one Aggregated Discovery
// Service stream (state of the world) subscribed to every
// ratelimit.config.ratelimit.v3.RateLimitConfig (TypeURL) for the node Config names.
//
// Each response is the whole config: its resources are rendered as
// envoyproxy/ratelimit's YAML and read by limits.Parse, the parser of the config
// files, so a config read from xDS meets every rule a file meets and makes the same
// rules; Apply then builds and puts them in force, as a reload of the files does. A
// response that does not convert or that Apply refuses is NACKed: the next request
// repeats the version in force and carries the error (error_detail, naming the
// resource and the field), and the rules in force stay. The fields a newer
// RateLimitConfig has and this module's proto lacks (a descriptor's quota_mode and
// metadata, the units WEEK, MONTH and YEAR) are read from the message's unknown
// fields; any other unknown field is an error, as an unknown field of a file is. A
// refused config that the server sends again (a snapshot cache answers a NACK with it,
// at once) is refused again after the backoff's wait, so that the two do not spin.
//
// When the stream ends (the server went away, or never answered) Run opens another
// after a backoff (Config.Backoff, with jitter), on the same gRPC connection, which
// itself reconnects every Config.ConnectRetry while the server cannot be reached.
// Run ends when its context does and leaves nothing running.
package xdsconfig
