# wsmux developer targets. `make test` is what CI runs; long jobs have their own targets.
GO        ?= go
FUZZTIME  ?= 60s
BENCHTIME ?= 1s
COUNT     ?= 10
PKGS      := ./...

.PHONY: test vet fmt-check lint bench bench-go fuzz fuzz-seeds

## test: vet, gofmt check, race-enabled tests (fuzz seed corpora run as tests), then the
## allocation tests again without -race (the race runtime makes sync.Pool drop items).
test: vet fmt-check
	$(GO) test -race -count=1 -timeout 14m $(PKGS)
	$(GO) test -count=1 -run 'Alloc' $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "not gofmt-ed:"; echo "$$out"; exit 1; fi

## lint: vet + gofmt + layering rules of DESIGN.md (frame and flow import nothing of the project; mux no Kubernetes).
lint: vet fmt-check
	@bash scripts/check-layers.sh

## bench: the side-by-side comparison (prints a table per workload).
bench:
	$(GO) test -run='^$$' -bench=. -benchmem -benchtime=$(BENCHTIME) ./frame/ ./flow/

## bench-go: go test -bench with -count suitable for benchstat.
bench-go:
	$(GO) test -run='^$$' -bench=. -benchmem -count=$(COUNT) ./... | tee bench.txt

## fuzz: every native fuzz target for FUZZTIME each.
fuzz:
	@bash scripts/fuzz-all.sh $(FUZZTIME)
