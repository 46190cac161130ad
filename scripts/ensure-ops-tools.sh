#!/bin/sh
# ensure-ops-tools.sh: install what the operator tests use when any is missing: chromium
# (the status page, loaded headless), Debian's prometheus package (promtool, and a
# real Prometheus that a test starts itself to scrape a cluster), and the clients the
# TLS tests run (curl, python3-redis). No service of theirs
# is left running (apt-install.sh).
set -eu
if command -v chromium >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 &&
	command -v curl >/dev/null 2>&1 && /usr/bin/python3 -c "import redis" 2>/dev/null; then
	exit 0
fi
"$(dirname "$0")/apt-install.sh" chromium fonts-dejavu-core prometheus curl python3-redis -- prometheus prometheus-node-exporter
