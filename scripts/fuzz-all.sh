#!/usr/bin/env bash
# Runs every native fuzz target (func FuzzX(f *testing.F) in a _test.go file) of
# every module (scripts/modules.sh) for $1 each (default 60s), one `go test -fuzz`
# per package and target, run in the package's own module.
#
# Environment (all optional):
#   FUZZPARALLEL      fuzz workers per target (go test -parallel; default GOMAXPROCS)
#   FUZZMINIMIZETIME  time to minimise each new or failing input (default 10s; the
#                     session targets' coverage is not deterministic, and Go's 60s
#                     default can stall them for a minute at a time)
#   FUZZCACHE         keep the generated corpus in this directory (one subdirectory
#                     per package; default: Go's cache, $(go env GOCACHE)/fuzz)
#   FUZZTARGETS       extended regexp on "<package> <target>": run only those
#   FUZZKEEPGOING=1   run every target even after a failure; exit 1 at the end
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-60s}
minimize=${FUZZMINIMIZETIME:-10s}
failed=()
for pkgdir in $(for m in $(bash scripts/modules.sh --common); do (cd "$m" && go list -f '{{.ImportPath}}={{.Dir}}' ./...); done); do
  pkg=${pkgdir%%=*}
  dir=${pkgdir#*=}
  for target in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\)' "$dir"/*_test.go 2>/dev/null | sed -E 's/^func (Fuzz[A-Za-z0-9_]+).*/\1/' | sort -u); do
    if [ -n "${FUZZTARGETS:-}" ] && ! echo "$pkg $target" | grep -qE "$FUZZTARGETS"; then
      continue
    fi
    args=(-run='^$' -fuzz="^${target}\$" -fuzztime="$t" -fuzzminimizetime="$minimize" -timeout=0)
    if [ -n "${FUZZPARALLEL:-}" ]; then
      args+=(-parallel="$FUZZPARALLEL")
    fi
    extra=()
    if [ -n "${FUZZCACHE:-}" ]; then
      cache="$FUZZCACHE/${pkg#github.com/wsmux/wsmux}"
      mkdir -p "$cache"
      extra=(-test.fuzzcachedir="$(cd "$cache" && pwd)")
    fi
    echo "== $pkg $target ($t)"
    before=$(ls "$dir/testdata/fuzz/$target" 2>/dev/null | sort || true)
    log=$(mktemp)
    rc=0
    (cd "$dir" && go test "${args[@]}" . "${extra[@]}") 2>&1 | tee "$log" || rc=$?
    after=$(ls "$dir/testdata/fuzz/$target" 2>/dev/null | sort || true)
    if [ $rc -ne 0 ] && [ "$before" = "$after" ] && grep -q '^    context deadline exceeded$' "$log"; then
      # Go's fuzz coordinator can fail a run at the -fuzztime boundary with a bare
      # "context deadline exceeded" and no input (golang/go#75804, fixed in Go 1.27):
      # not a finding.
      echo "~~ $pkg $target: ignored the fuzztime-deadline race of Go's coordinator (golang/go#75804): no failing input"
      rc=0
    fi
    rm -f "$log"
    if [ $rc -ne 0 ]; then
      echo "!! $pkg $target FAILED: the failing input is in $dir/testdata/fuzz/$target/ (see docs/fuzzing.md)"
      failed+=("$pkg $target")
      if [ "${FUZZKEEPGOING:-0}" != 1 ]; then
        exit 1
      fi
    fi
  done
done
if [ ${#failed[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${failed[@]}"
  exit 1
fi
