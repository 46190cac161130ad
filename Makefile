# leapcount: `make test` is what CI runs (.ci/run), then `make chart`; `make build` makes
# the static binary.
GO ?= go
BIN ?= bin/leapcount-node

.PHONY: test test-long build bench bench-short bench-rls bench-fleet gobench fuzz tools clean chart

# Installs redis-server, chromium and prometheus if missing (the tests start their own
# servers, on free ports), then vets and runs the tests under the race detector, with
# -short: the long ones are test-long's (internal/testkit/longtest), three packages at a time.
# The status page's screenshots land in bin/artifacts.
#
# Vet runs inside the race run (-vet=all: every analyzer go vet runs, on every package, those
# without test files too; a package that fails it fails and runs no tests), on the race
# build's own compiled dependencies. The simulation alone runs without -race, beside the
# race run: each of its runs is one goroutine, where the race detector has nothing to find
# and makes a run about twenty times slower (its 100 seeds here cost a core less than 20
# did under -race); its thousands are test-long's. The files only a build without -race
# or without lockrank compiles (//go:build !race, !lockrank: NORACE_PKGS) are vetted there.
#
# The tag lockrank checks, at every lock the owner and the lease keeper take, the order
# internal/lockrank writes down: a test that takes two of their locks in the wrong order
# panics, naming both.
NORACE_PKGS = $(sort ./tools/sim/ $(dir $(shell grep -rlE --include='*.go' '^//go:build.*!(race|lockrank)' .)))
test: tools
	@mkdir -p bin
	$(GO) test -tags lockrank -vet=all -short -timeout 20m ./tools/sim/ >bin/sim-short.log 2>&1 & sim=$$!; \
	LEAPCOUNT_ARTIFACTS=$(CURDIR)/bin/artifacts $(GO) test -race -tags lockrank -vet=all -short -p 3 -timeout 20m \
		$$($(GO) list ./... | grep -v '/tools/sim$$'); race=$$?; \
	wait $$sim; simrc=$$?; cat bin/sim-short.log; test $$race -eq 0 && test $$simrc -eq 0

# The long tests, which CI runs too (.ci/run): the fault suites against real node
# processes (chaos_test) and their harness's own (internal/testkit/proctest: make test would
# compile the node without -race for it alone), node's randomized fault runs, ring's
# balance at large sizes, the hostile clients' suite once more without -race and alone,
# where the others' p99 under each attack must stay within twice their p99 without it
# (under -race, beside ring's test, it is measured and logged), vet of the files only a
# build without -race compiles, the simulation's seeds 1-SIM_SEEDS and the soak. The simulation is one go test process that
# runs a seed per core at once (sim runSeeds: each run its own world, in one goroutine),
# so its 20,000 seeds use both cores of a two-core runner: 14 minutes on this machine's.
SIM_SEEDS ?= 20000
test-long: tools
	LEAPCOUNT_ARTIFACTS=$(CURDIR)/bin/artifacts $(GO) test -race -count=1 -timeout 40m ./chaos_test/ ./internal/testkit/proctest/
	$(GO) test -race -count=1 -timeout 20m -run '^(TestRandomizedFaults|TestBalanceWithinLoadBound|TestHostileClientsCostOthersNothing|TestKeyFloodWithRedisHoldsItsMemory)$$' ./node/ ./ring/
	LEAPCOUNT_HOSTILE_STRICT_P99=1 $(GO) test -count=1 -timeout 10m -run '^TestHostileClientsCostOthersNothing$$' ./node/
	$(GO) vet $(NORACE_PKGS)
	LEAPCOUNT_SIM_SEEDS=$(SIM_SEEDS) LEAPCOUNT_SIM_FIRST=1 $(GO) test -count=1 -timeout 60m -run 'TestSimulation$$' ./tools/sim/
	$(MAKE) soak

# The cluster simulation (package sim) for more seeds than make test's twenty: SEEDS
# seeds from a random first one (printed), or one seed replayed: make sim SEED=n REDIS=true.
SEEDS ?= 10000
.PHONY: sim
sim:
	@if [ -n "$(SEED)" ]; then \
		LEAPCOUNT_SIM_SEED=$(SEED) LEAPCOUNT_SIM_REDIS=$(REDIS) $(GO) test -count=1 -v -run 'TestSimulation$$' ./tools/sim/; \
	else \
		LEAPCOUNT_SIM_SEEDS=$(SEEDS) LEAPCOUNT_SIM_FIRST=$${LEAPCOUNT_SIM_FIRST:-$$(date +%s%N)} $(GO) test -count=1 -v -run 'TestSimulation$$' ./tools/sim/; \
	fi

# Each safety rule of the ownership code switched off in turn (internal/mutate, build tag
# simmutate): the first seed, in make test's order, that catches it. MUTANT_SEEDS: how far
# to look (all of test-long's seeds).
MUTANT_SEEDS ?= $(SIM_SEEDS)
.PHONY: sim-mutants
sim-mutants:
	LEAPCOUNT_SIM_MUTANT_SEEDS=$(MUTANT_SEEDS) $(GO) test -tags simmutate -count=1 -timeout 60m -v -run 'TestMutantsAreCaught$$' ./tools/sim/

# Long runs that CI runs too (.ci/run): README's ordinary operations (a fresh cluster's
# first requests, a join, a graceful leave, a rolling restart) under load, TRIES times,
# every request answered.
TRIES ?= 20
.PHONY: soak
soak: tools
	LEAPCOUNT_ORDINARY_TRIES=$(TRIES) $(GO) test -count=1 -timeout 60m -v -run 'TestOrdinaryOperationsAnswerNoErrors$$' ./chaos_test/

tools:
	./scripts/ensure-redis.sh
	./scripts/ensure-ops-tools.sh
	./scripts/ensure-go-tools.sh

# The side-by-side run against envoyproxy/ratelimit (package rlscompare): builds its
# service (scripts/ensure-ratelimit.sh: the pinned module from the Go module proxy, or a
# checkout at RATELIMIT_SRC) and leapcount-node, starts both from one set of its environment
# variables (ours as `leapcount-node ratelimit`), once with one runtime directory and once
# from one xDS server, and sends one request stream to both, comparing every answer.
RATELIMIT_SRC ?=
.PHONY: compare-ratelimit ratelimit
ratelimit:
	GO=$(GO) RATELIMIT_SRC=$(RATELIMIT_SRC) ./scripts/ensure-ratelimit.sh bin/ratelimit

compare-ratelimit: tools ratelimit build
	LEAPCOUNT_RATELIMIT_BIN=$(CURDIR)/bin/ratelimit LEAPCOUNT_NODE_BIN=$(CURDIR)/$(BIN) $(GO) test -tags ratelimitcompare -count=1 -v ./tools/rlscompare/

build:
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -o $(BIN) ./cmd/node

# The comparison harness (tools/cmd/bench): starts its own redis-server and nodes, drives
# them with one load generator and writes BENCHMARKS.md (about 9 minutes here, envoyproxy/ratelimit built first). bench-short
# checks the whole harness in under two minutes; its report goes to $TMPDIR, not the tree.
# One go build for both binaries: their shared packages compile once, in parallel.
bench: tools ratelimit
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./tools/cmd/bench ./cmd/node
	bin/bench -node bin/node -ratelimit bin/ratelimit

bench-short: tools
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./tools/cmd/bench ./cmd/node
	bin/bench -short -node bin/node

# Envoy's rate limit service, ShouldRateLimit with 1 and 3 descriptors: envoyproxy/ratelimit
# with its Redis (built from RATELIMIT_SRC when set) against leapcount on 1 and 3 nodes, same
# machine, one load generator: requests a second and server CPU per request.
bench-rls: tools ratelimit
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./tools/cmd/rlsbench ./cmd/node
	bin/rlsbench -node bin/node -ratelimit bin/ratelimit

# What a cluster costs as it grows (tools/cmd/fleet): 3 and then 24 node processes on
# loopback, without Redis: settle time after the last /readyz, idle CPU per node, and
# SIGKILL of a member that is not a voter and of a voter (about 3 minutes here).
bench-fleet:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/ ./tools/cmd/fleet ./cmd/node
	bin/fleet -node bin/node -sizes 3,24

# Every Go benchmark (go test -bench).
gobench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Runs each parser and decoder fuzzer (and the RESP framing guard's) for a while (the seed corpora run in every `make test`).
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseOp -fuzztime $(FUZZTIME) ./httpapi/
	$(GO) test -run '^$$' -fuzz FuzzFastOpMatchesDecoder -fuzztime $(FUZZTIME) ./httpapi/
	$(GO) test -run '^$$' -fuzz FuzzParseCommand -fuzztime $(FUZZTIME) ./respapi/
	$(GO) test -run '^$$' -fuzz FuzzDecodeFrame -fuzztime $(FUZZTIME) ./rpc/
	$(GO) test -run '^$$' -fuzz FuzzDecodeVersion -fuzztime $(FUZZTIME) ./cluster/
	$(GO) test -run '^$$' -fuzz FuzzGuard -fuzztime $(FUZZTIME) ./respapi/
	$(GO) test -run '^$$' -fuzz 'FuzzConn$$' -fuzztime $(FUZZTIME) ./rlsapi/internal/h2grpc/
	$(GO) test -run '^$$' -fuzz 'FuzzConnFrames$$' -fuzztime $(FUZZTIME) ./rlsapi/internal/h2grpc/
	$(GO) test -run '^$$' -fuzz FuzzDecodeRequest -fuzztime $(FUZZTIME) ./rlsapi/
	$(GO) test -run '^$$' -fuzz FuzzReadHandoff -fuzztime $(FUZZTIME) ./owner/
	$(GO) test -run '^$$' -fuzz 'FuzzReadRequest$$' -fuzztime $(FUZZTIME) ./lease/
	$(GO) test -run '^$$' -fuzz 'FuzzReadAnswer$$' -fuzztime $(FUZZTIME) ./lease/

# HTTP/2 conformance of the gRPC port (tools/h2spec, build tag h2spec): h2spec (built by
# scripts/ensure-go-tools.sh) against a node's --grpc and --grpc-tls; a case that fails
# must be named, with its reason, in tools/h2spec/allowed.txt. About a minute.
.PHONY: h2spec
h2spec: build
	./scripts/ensure-go-tools.sh
	LEAPCOUNT_NODE_BIN=$(CURDIR)/$(BIN) $(GO) test -tags h2spec -count=1 -v -timeout 10m ./tools/h2spec/

clean:
	rm -rf bin

# Lints the Helm chart (deploy/helm/leapcount), renders it with its defaults and with each
# ci/*-values.yaml into bin/chart/, and checks every rendering against the node's flags,
# ports and HTTP routes (scripts/chart.sh). Builds helm first when it is missing
# (scripts/ensure-helm.sh: minutes, once); `make test` never needs helm.
chart:
	./scripts/chart.sh

# Redraws docs/ui.png, README's picture of the status page: a three-node cluster in
# headless chromium, as cmd/node's TestStatusPageShowsEveryMember sees it.
.PHONY: ui-png
ui-png: tools
	rm -rf bin/ui-png
	LEAPCOUNT_ARTIFACTS=$(CURDIR)/bin/ui-png $(GO) test -count=1 -run '^TestStatusPageShowsEveryMember$$' ./cmd/node/
	cp bin/ui-png/ui-three-nodes.png docs/ui.png

# Builds the node image (FROM scratch + the static binary) and a local Redis image
# (FROM scratch + this machine's redis-server and its libraries), pulling nothing;
# docker-compose.yml runs them. Override the names with LEAPCOUNT_IMAGE and REDIS_IMAGE.
.PHONY: image
image: build
	./scripts/images.sh all

# Compose v2 ("docker compose") where it is installed, else v1 ("docker-compose"): the same
# commands work with either. `make up` starts Redis and three nodes from the images of
# `make image` (the nodes once Redis is healthy) and waits until every node is healthy;
# `make down` stops them (node4 too, if `--profile scale` started it) and drops Redis's
# data volume. docker-compose.yml lists the variables it reads (gossip key, cluster name,
# images, published ports).
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
.PHONY: up down certs
up:
	$(COMPOSE) up -d
	@for i in $$(seq 1 60); do \
		n=$$($(COMPOSE) ps | grep -E 'node[0-9]' | grep -c '(healthy)'); [ "$$n" -ge 3 ] && echo "3 nodes healthy" && exit 0; sleep 2; \
	done; echo "nodes not healthy after 120s:"; $(COMPOSE) ps; exit 1
down:
	$(COMPOSE) --profile scale down -v

# A development CA and server certificate in ./certs, for docker-compose.tls.yml (TLS on
# the client ports: docker compose -f docker-compose.yml -f docker-compose.tls.yml up -d).
certs:
	./scripts/dev-certs.sh certs

# The container chaos suite (chaos_docker/, build tag chaos, so `make test` neither needs
# Docker nor runs it): builds the images under tags of its own (a `make image` elsewhere
# cannot swap them mid-run), then runs every scenario on compose clusters of its own
# (project leapcount-chaos, host ports 18080-18083 and 16380-16383) and tears them down
# on every exit path, this recipe's included.
CHAOS_NODE_IMAGE ?= leapcount/node:chaos
CHAOS_REDIS_IMAGE ?= leapcount/redis:chaos
.PHONY: chaos
chaos: tools
	$(MAKE) image LEAPCOUNT_IMAGE=$(CHAOS_NODE_IMAGE) REDIS_IMAGE=$(CHAOS_REDIS_IMAGE)
	LEAPCOUNT_IMAGE=$(CHAOS_NODE_IMAGE) REDIS_IMAGE=$(CHAOS_REDIS_IMAGE) \
		$(GO) test -tags chaos -count=1 -v -timeout 15m ./chaos_docker/; \
	rc=$$?; $(COMPOSE) -p leapcount-chaos --profile scale down -v --remove-orphans >/dev/null 2>&1; exit $$rc
