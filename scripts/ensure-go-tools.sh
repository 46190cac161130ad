#!/bin/sh
# ensure-go-tools.sh: install the Go programs the client tests run, pinned, into
# bin/gotools when missing: grpc-health-probe (gRPC health over TLS). Tests look there
# after PATH.
set -eu
cd "$(dirname "$0")/.."
mkdir -p bin/gotools
if [ ! -x bin/gotools/grpc-health-probe ]; then
	GOBIN="$(pwd)/bin/gotools" go install github.com/grpc-ecosystem/grpc-health-probe@v0.4.41
fi
