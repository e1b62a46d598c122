# RenderMac. `make qualify` runs the main job on an embedded Postgres;
# `make test` runs the tests. See README.md.
GO      ?= go
PKGS    ?= ./...
SEEDS   ?= 500
STEPS   ?= 200

.PHONY: build test race lint bench qualify fuzz-model cross clean

build:
	$(GO) build ./...
	$(GO) build -o bin/rendermac ./cmd/rendermac

# The suite's default run: every package, race detector on, real Postgres
# (DATABASE_URL, else an embedded cluster from local binaries, else Docker).
test:
	$(GO) test -race -count=1 -timeout 14m $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	GOOS=darwin GOARCH=arm64 $(GO) build ./...

cross:
	GOOS=darwin GOARCH=arm64 $(GO) build -o bin/rendermac-darwin-arm64 ./cmd/rendermac

bench:
	$(GO) test -run='^$$' -bench=. -benchtime=2s -count=1 ./sim/ ./faults/

# At this stage qualification is the model campaign; later stages add the
# Postgres and full-stack campaigns and the scenario catalogue.
qualify:
	$(GO) run ./cmd/rendermac fuzz --target model --seeds $(SEEDS) --steps $(STEPS)

clean:
	rm -rf bin rendermac-failures
