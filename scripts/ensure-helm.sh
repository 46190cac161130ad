#!/usr/bin/env bash
# Prints the path of a helm binary of the pinned version, building it first when
# $(go env GOPATH)/bin has none (or another version). helm is built from source with the
# Go toolchain (`go install`), because the Go module proxy is the one place helm can come
# from on every machine this project runs on (no release tarballs, no apt package).
#
# The cold build (nothing of helm in the module cache, so every module it needs is
# downloaded, then compiled) took 3m15s on this 2-core machine when little else ran, and
# 5m16s while a test run compiled beside it; with the binary present this script
# returns at once. `make test` never calls it: only `make chart` does.
set -euo pipefail

HELM_VERSION=v3.22.0
bin="$(go env GOPATH)/bin/helm"

# The module version recorded in the binary: helm built by `go install` reports only
# "v3.22" as its own version unless told otherwise (its Makefile sets it by -ldflags).
have_version() {
	[ -x "$bin" ] && go version -m "$bin" 2>/dev/null | awk '$1 == "mod" { print $3 }' | grep -qx "$HELM_VERSION"
}

if ! have_version; then
	echo "ensure-helm: building helm $HELM_VERSION into $bin (minutes on a cold module cache)" >&2
	CGO_ENABLED=0 go install -ldflags "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
		"helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
	if ! have_version; then
		echo "ensure-helm: $bin is not helm $HELM_VERSION: $(go version -m "$bin" 2>&1 | head -3)" >&2
		exit 1
	fi
fi
echo "$bin"
