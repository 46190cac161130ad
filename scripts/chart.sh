#!/usr/bin/env bash
# `make chart`: lints the Helm chart (deploy/helm/leapcount) and renders it with its
# defaults and with each ci/*-values.yaml into bin/chart/, then checks every rendering
# against the node's own flags and HTTP routes (cmd/node TestChartRenderings, which
# `go test ./...` skips for want of these files). Fails if any step does.
set -euo pipefail
cd "$(dirname "$0")/.."

helm="$(./scripts/ensure-helm.sh)"
chart=deploy/helm/leapcount
out=bin/chart
rm -rf "$out"
mkdir -p "$out"

# render NAME VALUES: lint with those values, then template into $out/NAME.yaml, with a
# copy of the values beside it (the test reads which Secrets they say the user provides).
render() {
	"$helm" lint --strict "$chart" -f "$2"
	"$helm" template lc "$chart" --namespace leapcount -f "$2" >"$out/$1.yaml"
	cp "$2" "$out/$1.values.yaml"
}

echo "# no values: the chart's defaults" >"$out/defaults.in.yaml"
render defaults "$out/defaults.in.yaml"
for v in "$chart"/ci/*-values.yaml; do
	render "$(basename "$v" -values.yaml)" "$v"
done
LEAPCOUNT_CHART_RENDERED="$PWD/$out" go test -count=1 -run '^TestChartRenderings$' -v ./cmd/node/
