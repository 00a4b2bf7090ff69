#!/usr/bin/env bash
# Enforces the layering of README.md's Layout table and the module boundaries of docs/modules.md:
# - modules: the core (the repository root) requires gobwas/ws and golang.org/x only; the adapters
#   require their Kubernetes modules at the oldest minor they claim; the product binary (cmd/wsmux)
#   links no benchmark peer; cmd/wsmux holds its main package only;
# - packages: frame and flow import nothing of the project, mux never reaches Kubernetes or the
#   adapters; the session engine (mux/internal/engine) knows no sockets (net), no goroutines and no
#   clock of its own, and imports nothing of mux above it; no library or server package builds on
#   testing, the test helpers, bench or the fuzz harnesses.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=github.com/wsmux/wsmux
fail=0
say() { echo "layering: $*"; fail=1; }

# --- modules ---
if graph=$(go list -m -f '{{if not .Main}}{{.Path}}{{end}}' all); then
  bad=$(echo "$graph" | grep -vE '^(github\.com/gobwas/|golang\.org/x/|$)' || true)
  [ -z "$bad" ] || say "the core module's graph holds $(echo $bad)"
else
  say "cannot list the core module's graph (go mod tidy?)"
fi
oldest=$(grep -E '^\s+k8s\.io/(apimachinery|client-go) ' adapters/go.mod | awk '{print $2}' | sed -E 's/^v0\.([0-9]+)\..*/\1/' | sort -u)
newer=$(ls adapters/go.k8s1*.mod 2>/dev/null | sed -E 's/.*go\.k8s1([0-9]+)\.mod/\1/' | sort -n | head -1)
if [ "$(echo "$oldest" | wc -l)" != 1 ]; then say "adapters/go.mod requires apimachinery and client-go at different minors: $(echo $oldest)"
elif [ -n "$newer" ] && [ "$oldest" -ge "$newer" ]; then say "adapters/go.mod (v0.$oldest) is not older than adapters/go.k8s1$newer.mod"; fi
bad=$(cd cmd/wsmux && go list -deps . | grep -E "^(github\.com/(hashicorp/yamux|xtaci/smux)|$mod/bench)(/|\$)" | tr '\n' ' ' || true)
[ -z "$bad" ] || say "the wsmux binary links the benchmark's $bad"
bad=$(cd cmd/wsmux && go list ./... | grep -v "^$mod/cmd/wsmux\$" | tr '\n' ' ' || true)
[ -z "$bad" ] || say "cmd/wsmux holds packages besides its main package: $bad (product logic belongs in gateway/)"

# The real control plane is e2e/kube's alone: no other module, published or not, requires
# k8s.io/kubernetes, and none builds a package of it or of etcd's server, tests included (etcd's
# server module is in the gateway's module graph through k8s.io/apiserver's go.mod, unbuilt).
for m in $(bash scripts/modules.sh); do
  [ "$m" = e2e/kube ] && continue
  bad=$(cd "$m" && { go list -m -f '{{.Path}}' all | grep -E '^k8s\.io/kubernetes$' || true
    go list -deps -test ./... | grep -E '^(k8s\.io/kubernetes|go\.etcd\.io/etcd/server/v3)(/|$)' || true; } | sort -u | tr '\n' ' ')
  [ -z "$bad" ] || say "module $m takes in $bad: the real control plane belongs to e2e/kube alone"
done

# --- packages of the core ---
for p in frame flow controller; do
  bad=$(go list -deps "./$p/" | grep "^$mod/" | grep -v "^$mod/$p\$" || true)
  [ -z "$bad" ] || say "$p imports $bad"
done
bad=$(go list -deps ./mux/... ./conformance/... | grep -E '^k8s\.io/|/adapters/' || true)
[ -z "$bad" ] || say "mux or the conformance runner reaches $bad"
bad=$(go list -deps ./mux/internal/engine | grep -E "^(net|os/exec|github.com/gobwas/.*|$mod/mux|$mod/mux/internal/wsio)\$" || true)
[ -z "$bad" ] || say "the engine imports $bad"
bad=$(grep -nE '\bgo (func|[A-Za-z_.]+\()|time\.(Now|Since|Until|After|AfterFunc|NewTimer|NewTicker|Sleep|Tick)\(' \
  $(ls mux/internal/engine/*.go | grep -v _test.go) || true)
if [ -n "$bad" ]; then say "the engine starts goroutines or reads the clock:"; echo "$bad"; fi
# frame's and flow's tests build neither mux nor the session harnesses (package fuzz): their fuzz
# targets use the subpackages fuzz/framefuzz and fuzz/flowfuzz, which import only frame or flow
# and fuzz/internal/program, the harnesses' program reader, which imports nothing of the module.
for p in frame flow; do
  bad=$(go list -deps -test "./$p/" | grep -E "^$mod/(mux|fuzz)(/| |\$)" | grep -vE "^$mod/fuzz/(${p}fuzz|internal/program)( |\$)" || true)
  [ -z "$bad" ] || say "$p's tests build $bad"
done
bad=$(go list -deps ./fuzz/internal/program/ | grep -E "^$mod/" | grep -v "^$mod/fuzz/internal/program\$" || true)
[ -z "$bad" ] || say "fuzz/internal/program imports $bad"

# --- every module: testing, the test helpers, bench and the fuzz harnesses are built only into
# tests, the tools themselves and the command (wsmux demo serves the stand-in cluster) ---
helpers="internal/(testnet|tsinterop|testkit/[a-z]+)|gateway/clustertest|gateway/handoff/handofftest|adapters/internal/conformance|adapters/e2e(/.*)?|e2e/kube(/.*)?|bench(/.*)?|fuzz(/.*)?"
for m in $(bash scripts/modules.sh); do
  while read -r p deps; do
    case "$p" in "$mod"/cmd/wsmux | "$mod"/examples/*) continue ;; esac
    if echo "$p" | grep -qE "^$mod/($helpers)\$"; then continue; fi
    bad=$(echo "$deps" | tr ' ' '\n' | grep -E "^testing\$|^$mod/($helpers)\$" | tr '\n' ' ' || true)
    [ -z "$bad" ] || say "$p depends on $bad"
  done < <(cd "$m" && go list -f '{{.ImportPath}} {{join .Deps " "}}' ./...)
done
# The stand-in cluster knows no wsmux.
bad=$(cd gateway && go list -deps ./clustertest | grep -E "^$mod/(mux|adapters)(/|\$)" | tr '\n' ' ' || true)
[ -z "$bad" ] || say "clustertest reaches $bad"
exit $fail
