// Package h2spec holds the HTTP/2 conformance run of the gRPC port: h2spec
// (github.com/summerwind/h2spec, installed by scripts/ensure-go-tools.sh) against a
// node's --grpc, in plaintext and over TLS (--grpc-tls), every case that fails named
// with its reason in allowed.txt. The test runs only with the build tag h2spec and
// LEAPCOUNT_NODE_BIN naming the node's binary: make h2spec builds both and runs it.
package h2spec
