#!/bin/sh
# ensure-ratelimit.sh OUT: build envoyproxy/ratelimit's service (./src/service_cmd) into
# OUT, for the side-by-side comparison (make compare-ratelimit) and the benchmarks (make
# bench, make bench-rls). The source is RATELIMIT_SRC when set (a checkout), else the
# module github.com/envoyproxy/ratelimit at RATELIMIT_VERSION from the Go module proxy,
# so a fresh clone needs nothing but the proxy. Go's build cache makes a second build
# take seconds.
set -eu

OUT=${1:?usage: ensure-ratelimit.sh OUT}
GO=${GO:-go}
# Pinned: the commit the comparison and the benchmark figures were made with.
VERSION=${RATELIMIT_VERSION:-v1.4.1-0.20260122083618-3fb702589d36}

case "$OUT" in /*) ;; *) OUT="$(pwd)/$OUT" ;; esac
mkdir -p "$(dirname "$OUT")"
if [ -n "${RATELIMIT_SRC:-}" ]; then
	SRC=$RATELIMIT_SRC
else
	TMP=$(mktemp -d)
	trap 'rm -rf "$TMP"' EXIT
	# go mod download needs a module to run in; an empty one in a temporary directory.
	(cd "$TMP" && "$GO" mod init ratelimit-fetch >/dev/null 2>&1)
	SRC=$(cd "$TMP" && GOFLAGS=-mod=mod "$GO" mod download -json "github.com/envoyproxy/ratelimit@$VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [ -z "$SRC" ] || [ ! -d "$SRC" ]; then
		echo "ensure-ratelimit.sh: could not download github.com/envoyproxy/ratelimit@$VERSION from the module proxy" >&2
		exit 1
	fi
fi
# -mod=mod: its go.sum may lack entries this Go wants; the module cache is read-only, so
# nothing is written into the source.
(cd "$SRC" && GOFLAGS=-mod=mod CGO_ENABLED=0 "$GO" build -trimpath -o "$OUT" ./src/service_cmd)
echo "ensure-ratelimit.sh: built $OUT from ${RATELIMIT_SRC:-github.com/envoyproxy/ratelimit@$VERSION}" >&2
