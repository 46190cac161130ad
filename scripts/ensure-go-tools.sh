#!/bin/sh
# ensure-go-tools.sh: install the Go programs the client tests and make h2spec run,
# pinned, into bin/gotools when missing: grpc-health-probe (gRPC health over TLS) and
# h2spec (HTTP/2 conformance, of the gRPC port). Tests look there after PATH.
set -eu
cd "$(dirname "$0")/.."
mkdir -p bin/gotools
if [ ! -x bin/gotools/grpc-health-probe ]; then
	GOBIN="$(pwd)/bin/gotools" go install github.com/grpc-ecosystem/grpc-health-probe@v0.4.41
fi
# h2spec v2.2.1 is the newest the Go module proxy serves (its later tags are not
# modules). It has no go.mod, so `go install ...@v2.2.1` would take the newest of each
# of its dependencies, a different build every month: it is built in a module of its
# own here, every dependency pinned (their hashes checked against the checksum database).
if [ ! -x bin/gotools/h2spec ]; then
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' EXIT
	cat >"$tmp/go.mod" <<'MOD'
module leapcount.local/h2spec-build

go 1.26

require (
	github.com/summerwind/h2spec v2.2.1+incompatible
	github.com/fatih/color v1.19.0
	github.com/mattn/go-colorable v0.1.14
	github.com/mattn/go-isatty v0.0.20
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.49.0
	golang.org/x/text v0.43.0
)
MOD
	out="$(pwd)/bin/gotools/h2spec"
	(cd "$tmp" && GOFLAGS=-mod=mod go build -o "$out" github.com/summerwind/h2spec/cmd/h2spec)
fi
