# RenderMac. `make qualify` runs the main job on an embedded Postgres;
# `make test` runs the tests. See README.md.
GO      ?= go
PKGS    ?= ./...
SEEDS   ?= 500
STEPS   ?= 200
# The harness build: fault points armed, broken variants compiled in, and
# the Docker fallback for Postgres (testcontainers). The default build
# (make build, make cross: what agents and servers run) has none of them.
TAGS    ?= faultpoints,mutations,docker

.PHONY: build setup test race lint bench qualify mutate fuzz-model cross clean

build:
	$(GO) build ./...
	$(GO) build -o bin/rendermac ./cmd/rendermac

# The suite's default run: every package, race detector on, real Postgres
# (DATABASE_URL, else an embedded cluster from local binaries, else Docker).
# -tags faultpoints arms the fault points the scenario catalogue blocks and
# kills at; -tags mutations compiles in the broken variants the harness must
# catch (--server-variant); production builds (make build) have neither,
# which TestDefaultBuild* checks from the tagged build.
#
# JUNIT=FILE also writes both runs as one JUnit XML report (for CI test
# views) through gotestsum, pinned and fetched by `go run` (nothing else to
# install); the exit status is still the tests'. Without JUNIT nothing
# changes.
GOTESTSUM ?= gotest.tools/gotestsum@v1.13.0
JUNIT     ?=
TEST_RACE    = $(GO) test -race -count=1 -timeout 14m -tags $(TAGS) $(PKGS)
TEST_DEFAULT = $(GO) test -count=1 ./server/faultpoint/

# What the tests run beside Go (Postgres's server binaries, ffmpeg, chromium,
# node and the composition renderer, versitygw, pebble, patroni, etcd),
# installed when missing: each step said with its time, present ones skipped,
# one line saying what to run where it cannot install (apt-get needs root).
setup:
	@bash .ci/setup

test: setup
ifeq ($(JUNIT),)
	$(TEST_RACE)
	$(TEST_DEFAULT)   # the production build: fault points are no-ops
else
	$(GO) run $(GOTESTSUM) --junitfile $(JUNIT) --format testname --raw-command -- \
	  sh -c 'st=0; $(TEST_RACE) -json || st=1; $(TEST_DEFAULT) -json || st=1; exit $$st'
endif

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags faultpoints ./...
	$(GO) vet -tags $(TAGS) ./...
	GOOS=darwin GOARCH=arm64 $(GO) build ./...

cross:
	GOOS=darwin GOARCH=arm64 $(GO) build -o bin/rendermac-darwin-arm64 ./cmd/rendermac

# Model steps/s with invariant checks on; leases/s and commits/s on an
# embedded Postgres beside a pgbench run of the same lease transaction;
# then the whole stack under load (rendermac bench, goals checked), in one
# process and again with the server as a separate process (--two-process);
# the console's pages over 100,000 jobs (ms/page); the model-vs-Postgres
# and three-way campaigns as qualify runs them (steps/s). Its pgbench runs
# take 3 s, not rendermac bench's default 5, and the package benchmarks
# 1 s each, to keep make bench under 3 minutes (issue 13) with issue 32's
# floor rounds and campaign phases in it.
bench:
	$(GO) test -run='^$$' -bench=. -benchtime=1s -count=1 ./harness/model/ ./server/fencing/
	$(GO) test -run='^$$' -bench=. -benchtime=500ms -count=1 ./server/artifact/ ./protocol/
	$(GO) test -tags $(TAGS) -run='^$$' -bench='DiffCampaign|StackCampaign' -benchtime=3x -count=1 -timeout 20m ./harness/targets/
	$(GO) test -run='^$$' -bench=ConsolePages -benchtime=1s -count=1 ./server/console/
	$(GO) run ./cmd/rendermac bench --agents 100 --jobs 500 --duration 4s --pgbench-seconds 3 --two-process --json bench.json

# The CI gate: model and model-vs-Postgres campaigns on an embedded Postgres
# (DATABASE_URL if set), evidence card in evidence-out/; exits 1 on a failure.
# It installs nothing: .ci/setup --qualify says what it will not run for
# want of a tool (the card says it again).
qualify:
	@bash .ci/setup --qualify
	$(GO) run -tags $(TAGS) ./cmd/rendermac qualify --seeds $(SEEDS) --steps $(STEPS) --out evidence-out

# The source mutation campaign: every mutant of mutate.Catalogue (a fence
# predicate, a lock, a clock, a budget...) applied to a copy of the tree and
# run through a bounded qualify gate (first focused on the checks that reach
# the mutant's rules: docs/harness.md "mutate"); survivors also through their package's
# tests. Score card in evidence-out/; exits 1 if a mutant survives or is
# killed only by package tests (a gap in qualify, which is the one gate).
mutate:
	$(GO) run ./cmd/rendermac mutate --workers 2 --tests --out evidence-out --record docs/mutation-score.json

clean:
	rm -rf bin rendermac-failures
