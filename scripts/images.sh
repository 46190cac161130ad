#!/bin/sh
# images.sh: build the images docker-compose.yml runs, locally, pulling nothing from any
# registry.
#
#   scripts/images.sh [node|redis|all]      (default: all; `make image` runs it)
#
# node:  FROM scratch + the static binary bin/leapcount-node (built here if missing),
#        tagged $LEAPCOUNT_IMAGE (default leapcount/node:local).
# redis: FROM scratch + this machine's redis-server and redis-cli (the compose health
#        check runs `redis-cli ping`: the image has no shell), the shared libraries ldd
#        lists for them and the dynamic loader, tagged $REDIS_IMAGE (default
#        leapcount/redis:local). Elsewhere, a public image works as well (it has
#        redis-cli too): REDIS_IMAGE=redis:7 docker compose up.
set -eu

cd "$(dirname "$0")/.."
LEAPCOUNT_IMAGE=${LEAPCOUNT_IMAGE:-leapcount/node:local}
REDIS_IMAGE=${REDIS_IMAGE:-leapcount/redis:local}
what=${1:-all}

node_image() {
	if [ ! -x bin/leapcount-node ]; then
		CGO_ENABLED=0 go build -trimpath -buildvcs=auto -o bin/leapcount-node ./cmd/node
	fi
	docker build -t "$LEAPCOUNT_IMAGE" .
	echo "images.sh: built $LEAPCOUNT_IMAGE"
}

# redis_bin prints the path of a Redis program (/usr/bin first), or stops the script.
redis_bin() {
	bin=/usr/bin/$1
	[ -e "$bin" ] || bin=$(command -v "$1" || true)
	if [ -z "$bin" ] || [ ! -e "$bin" ]; then
		echo "images.sh: $1 is not installed; run scripts/ensure-redis.sh" >&2
		exit 1
	fi
	echo "$bin"
}

redis_image() {
	server=$(redis_bin redis-server)
	cli=$(redis_bin redis-cli)
	ctx=$(mktemp -d)
	trap 'rm -rf "$ctx"' EXIT
	mkdir -p "$ctx/rootfs/usr/bin" "$ctx/rootfs/data"
	# Copy the file the link points to, under the name redis-server: the Debian binary
	# picks its mode (server or checker) from the name it is run by.
	cp -L "$server" "$ctx/rootfs/usr/bin/redis-server"
	cp -L "$cli" "$ctx/rootfs/usr/bin/redis-cli"
	# Every library ldd resolves ("name => /path (addr)") and the loader ("/path (addr)").
	{ ldd "$server" && ldd "$cli"; } | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u |
		while read -r lib; do
			mkdir -p "$ctx/rootfs$(dirname "$lib")"
			cp -L "$lib" "$ctx/rootfs$lib"
		done
	cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/bin
WORKDIR /data
EXPOSE 6379
CMD ["redis-server", "--bind", "0.0.0.0", "--protected-mode", "no"]
DOCKERFILE
	docker build -t "$REDIS_IMAGE" "$ctx"
	echo "images.sh: built $REDIS_IMAGE from $server and $cli"
}

case "$what" in
node) node_image ;;
redis) redis_image ;;
all) node_image && redis_image ;;
*)
	echo "usage: $0 [node|redis|all]" >&2
	exit 2
	;;
esac
