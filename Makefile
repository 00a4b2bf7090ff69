# wsmux developer targets. `make test` is what CI runs; long jobs have their own targets.
GO        ?= go
FUZZTIME  ?= 60s
BENCHTIME ?= 1s
COUNT     ?= 10
# The tunnel soak test (200 concurrent tunnelled connections with checksums) runs this long.
WSMUX_SOAK ?= 30s
export WSMUX_SOAK

# The Go modules (docs/modules.md): each is built, vetted and tested in its own folder with its
# own go.mod, so that each is tested with the dependency versions its users get (a go.work would
# unite their requirements and test the adapters with the gateway's Kubernetes release).
# e2e/kube (the real control plane) is left to make e2e-kube: see scripts/modules.sh --common.
MODULES := $(shell bash scripts/modules.sh --common)
# each runs a command in every module's folder, naming the module first.
each = set -e; for m in $(MODULES); do echo "== module $$m"; (cd $$m && $(1)); done

.DEFAULT_GOAL := test
.PHONY: wsmux test test-k8s test-consumers ts-test vet fmt-check lint cross bench bench-wan bench-go bench-idle fuzz fuzz-seeds fuzz-long fuzz-ci fuzz-vet e2e-kube

# The packages whose tests drive sessions: make test runs them once more with the reference
# driver (mux.DriverGoroutines) in place of the default fast paths: in the core module...
DRIVERPKGS := ./mux/... ./fuzz/... ./conformance/...
# ...and once more on the event loop (mux.DriverEventLoop; mux's internal packages do not
# depend on the driver, and the full-size integrity test runs over TCP only: pipes fall back).
EVLOOPPKGS := ./mux/ ./fuzz/... ./conformance/...
# The adapters module's packages run on all three drivers too.

## wsmux: the command's binary, ./wsmux (cmd/wsmux is a module of its own).
wsmux:
	cd cmd/wsmux && $(GO) build -o $(CURDIR)/wsmux .

## test: vet, gofmt check, race-enabled tests of every module (fuzz seed corpora run as tests), the
## session tests again on the reference driver (WSMUX_DRIVER=goroutines) and on the event loop
## (WSMUX_DRIVER=eventloop), the adapters against every Kubernetes minor they claim (test-k8s;
## the module internal/modtest checks the consumers' dependency graphs), then without -race: the allocation tests
## (the race runtime makes sync.Pool drop items) and the full-size integrity and slow-reader tests
## (256 x 4 MiB, 64 MiB) and the resumption fault-injection test (64 x 16 MiB each way through a
## cutting proxy), which -race slows past the time budget and so runs at reduced sizes.
test: vet fmt-check ts-test
	@$(call each,$(GO) test -race -count=1 -timeout 14m ./...)
	WSMUX_DRIVER=goroutines $(GO) test -race -count=1 -timeout 10m $(DRIVERPKGS)
	cd adapters && WSMUX_DRIVER=goroutines $(GO) test -race -count=1 -timeout 10m ./...
	WSMUX_DRIVER=eventloop $(GO) test -race -count=1 -timeout 10m $(EVLOOPPKGS)
	cd adapters && WSMUX_DRIVER=eventloop $(GO) test -race -count=1 -timeout 10m ./...
	@$(MAKE) --no-print-directory test-k8s
	@$(call each,$(GO) test -count=1 -timeout 5m -run 'Alloc|Integrity|SlowReader|ResumeFaultInjection' ./...)
	WSMUX_DRIVER=eventloop $(GO) test -count=1 -timeout 5m -run 'Alloc|IntegrityTCP|SlowReader' ./mux/

## test-k8s: the adapters module against the newer Kubernetes minors it claims: go.mod holds the
## oldest (make test runs that), adapters/go.k8s1NN.mod each newer one (docs/modules.md).
K8SMODFILES := $(sort $(wildcard adapters/go.k8s1*.mod))
test-k8s:
	@set -e; for f in $(K8SMODFILES); do f=$$(basename $$f); \
	  echo "== adapters with $$f: $$(grep -E '^\s+k8s.io/client-go ' adapters/$$f | xargs)"; \
	  (cd adapters && $(GO) vet -modfile=$$f ./... && $(GO) test -race -count=1 -timeout 10m -modfile=$$f ./...); done

## test-consumers: fresh modules that import one wsmux module each, built against this checkout:
## one that imports only mux has no k8s.io module in its graph and keeps a pinned client-go
## after go mod tidy; the adapters keep a kubelet's or apiserver's oldest supported release; every
## module, published as a tag would publish it, is taken with go get and no replace directive
## (make test runs these with the other modules' tests).
test-consumers:
	cd internal/modtest && $(GO) test -count=1 ./...

## ts-test: the TypeScript client clients/ts: npm ci (versions of package-lock.json) when the lock
## file changed, then npm test (node:test on testdata/vectors) and a check that the web
## terminal's committed bundle (gateway/webui/static) matches its sources; the Go
## tests of internal/tsinterop and webui (headless chromium) run what it compiled.
ts-test: clients/ts/node_modules/.package-lock.json
	cd clients/ts && npm test && npm run --silent check-bundle

clients/ts/node_modules/.package-lock.json: clients/ts/package-lock.json
	cd clients/ts && npm ci --no-audit --no-fund

vet:
	@$(call each,$(GO) vet ./...)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "not gofmt-ed:"; echo "$$out"; exit 1; fi

## e2e-kube: unmodified kubectl through `wsmux gateway` (built from cmd/wsmux) to a real
## kube-apiserver and etcd started in the test's process (module e2e/kube, docs/gateway.md "Against a
## real control plane"): prints their versions, then runs the matrix. WSMUX_KUBE_CP_MIB (default
## 1024) is the kubectl cp file of the first leg; the other legs copy 16 MiB (WSMUX_KUBE_CP_MIB_ALL
## sets every leg's). The go test runs in local directory mode so that its output (versions, cp
## rates) is printed; -ldflags stamps the apiserver's /version with the module's release, as a
## release build is (unstamped, it says v0.0.0-master).
E2EKUBE_TIMEOUT ?= 25m
e2e-kube:
	@cd e2e/kube && $(GO) list -m -f '{{.Path}} {{.Version}}' k8s.io/kubernetes go.etcd.io/etcd/server/v3
	cd e2e/kube && $(GO) vet ./...
	cd e2e/kube && v=$$($(GO) list -m -f '{{.Version}}' k8s.io/kubernetes) && mm=$${v#v} && \
	  $(GO) test -count=1 -timeout $(E2EKUBE_TIMEOUT) -ldflags "-X k8s.io/component-base/version.gitVersion=$$v \
	  -X k8s.io/component-base/version.gitMajor=$${mm%%.*} -X k8s.io/component-base/version.gitMinor=$$(echo $$mm | cut -d. -f2)"

## lint: vet + gofmt + layering rules of README.md's Layout (frame and flow import nothing of the project; mux no Kubernetes)
## + the cross builds.
lint: vet fmt-check cross
	@bash scripts/check-layers.sh

## cross: every package builds for Windows and macOS too (go install of the command works there),
## and its tests compile and vet there (tests that need Unix signals or nginx are built for unix only).
cross:
	@$(call each,GOOS=windows $(GO) build ./... && GOOS=darwin $(GO) build ./... && GOOS=windows $(GO) vet ./... && GOOS=darwin $(GO) vet ./...)

## bench: the side-by-side comparison of wsmux, SPDY, yamux, smux and the tcp/ws ceilings: the
## full suite, 3 runs each, medians, with the read-size (Bulk1Read), TLS (TLS*) and WAN (WAN*, 20
## and 80 ms RTT at 1 Gbit/s, one 3 s run each) tables beside the others (about 15 min on 2
## cores; `cd bench && go run ./cmd/wsmux-bench bench --quick` takes about 5): prints the CPU model
## and a table per workload (MB/s beside cpu-ms/MiB, the process CPU per MiB moved), writes
## docs/bench/{bench.md,bench.svg,results.json}. bench-wan runs the WAN tables alone (about 3 min).
bench:
	@grep -m1 "model name" /proc/cpuinfo || true
	cd bench && $(GO) run ./cmd/wsmux-bench bench --count 3 --out ../docs/bench

bench-wan:
	@grep -m1 "model name" /proc/cpuinfo || true
	cd bench && $(GO) run ./cmd/wsmux-bench bench --workloads WANBulk1,WANStreams8,WANInteractive

## bench-idle: many idle sessions in one server process, clients in a second one
## (docs/performance.md): 15,000 on the event loop, then on the fast paths, then 1,000 of
## 15,000 echoing for 60 s on the event loop. About 4 minutes.
bench-idle:
	cd bench && $(GO) run ./cmd/wsmux-bench idle --sessions 15000 --driver eventloop
	cd bench && $(GO) run ./cmd/wsmux-bench idle --sessions 15000 --driver fastpaths
	cd bench && $(GO) run ./cmd/wsmux-bench idle --sessions 15000 --driver eventloop --active 1000 --duration 60s

## bench-go: go test -bench with -count suitable for benchstat, into bench.txt; narrow it with
## BENCH (a -bench regexp), e.g. make bench-go BENCH='Bulk1|Echo64' COUNT=6.
bench-go:
	@rm -f bench.txt; $(call each,$(GO) test -run='^$$' -bench='$(or $(BENCH),.)' -benchmem -count=$(COUNT) -benchtime=$(BENCHTIME) ./... | tee -a $(CURDIR)/bench.txt)

## fuzz: every native fuzz target for FUZZTIME each (docs/fuzzing.md). FUZZPARALLEL,
## FUZZTARGETS, FUZZCACHE, FUZZKEEPGOING: see scripts/fuzz-all.sh.
fuzz:
	@bash scripts/fuzz-all.sh $(FUZZTIME)

## fuzz-long: hours of fuzzing, FUZZTIME per target if given (make fuzz-long FUZZTIME=2h),
## else 8h, every target even after a failure, the generated corpus kept in FUZZCACHE
## (default fuzz/workdir/cache, ignored by git) so the next run starts where this one stopped.
FUZZLONGTIME ?= $(if $(filter command line environment,$(origin FUZZTIME)),$(FUZZTIME),8h)
fuzz-long:
	@FUZZCACHE=$${FUZZCACHE:-fuzz/workdir/cache} FUZZKEEPGOING=1 bash scripts/fuzz-all.sh $(FUZZLONGTIME)

## fuzz-ci: the go-fuzz entry points still build and run, then every native target for 10s.
fuzz-ci: fuzz-vet
	@bash scripts/fuzz-all.sh 10s

## fuzz-vet: vet and run the go-fuzz (build tag gofuzz) entry points over their seeds.
fuzz-vet:
	$(GO) vet -tags gofuzz ./fuzz/...
	$(GO) test -tags gofuzz -count=1 -run 'TestGoFuzzEntries' ./fuzz/
