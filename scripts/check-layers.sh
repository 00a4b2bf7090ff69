#!/usr/bin/env bash
# Enforces the layering of README.md's Layout table: frame and flow import nothing of the project,
# mux never reaches Kubernetes or the adapters; the session engine (mux/internal/engine) knows no
# sockets (net), no goroutines and no clock of its own, and imports nothing of mux above it; no
# library or server package builds on testing, the test helpers, bench or the fuzz harnesses.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
fail=0
for p in frame flow controller; do
  bad=$(go list -deps "./$p/" | grep "^$mod/" | grep -v "^$mod/$p\$" || true)
  if [ -n "$bad" ]; then echo "layering: $p imports $bad"; fail=1; fi
done
if [ -d mux ]; then
  bad=$(go list -deps ./mux/... | grep -E '^k8s\.io/|/adapters/' || true)
  if [ -n "$bad" ]; then echo "layering: mux reaches $bad"; fail=1; fi
fi
if [ -d mux/internal/engine ]; then
  bad=$(go list -deps ./mux/internal/engine | grep -E "^(net|os/exec|github.com/gobwas/.*|$mod/mux|$mod/mux/internal/wsio)\$" || true)
  if [ -n "$bad" ]; then echo "layering: the engine imports $bad"; fail=1; fi
  bad=$(grep -nE '\bgo (func|[A-Za-z_.]+\()|time\.(Now|Since|Until|After|AfterFunc|NewTimer|NewTicker|Sleep|Tick)\(' \
    $(ls mux/internal/engine/*.go | grep -v _test.go) || true)
  if [ -n "$bad" ]; then echo "layering: the engine starts goroutines or reads the clock:"; echo "$bad"; fail=1; fi
fi
# frame's and flow's tests build neither mux nor the session harnesses (package fuzz): their fuzz
# targets use the subpackages fuzz/framefuzz and fuzz/flowfuzz, which import only frame or flow
# and fuzz/internal/program, the harnesses' program reader, which imports nothing of the module.
for p in frame flow; do
  bad=$(go list -deps -test "./$p/" | grep -E "^$mod/(mux|fuzz)(/| |\$)" | grep -vE "^$mod/fuzz/(${p}fuzz|internal/program)( |\$)" || true)
  if [ -n "$bad" ]; then echo "layering: $p's tests build $bad"; fail=1; fi
done
bad=$(go list -deps ./fuzz/internal/program/ | grep -E "^$mod/" | grep -v "^$mod/fuzz/internal/program\$" || true)
if [ -n "$bad" ]; then echo "layering: fuzz/internal/program imports $bad"; fail=1; fi
# testing, the test helpers, bench and the fuzz harnesses are built only into tests, the tools
# themselves and the command (wsmux bench, wsmux demo): no library or server package depends on them.
helpers="cmd/wsmux/internal/(testnet|clustertest|tsinterop|handoff/handofftest)|adapters/internal/(kubelettest|conformance)|adapters/e2e|bench|fuzz(/.*)?"
while read -r p deps; do
  case "$p" in "$mod"/cmd/wsmux | "$mod"/examples/*) continue ;; esac
  if echo "$p" | grep -qE "^$mod/($helpers)\$"; then continue; fi
  bad=$(echo "$deps" | tr ' ' '\n' | grep -E "^testing\$|^$mod/($helpers)\$" | tr '\n' ' ' || true)
  if [ -n "$bad" ]; then echo "layering: $p depends on $bad"; fail=1; fi
done < <(go list -f '{{.ImportPath}} {{join .Deps " "}}' ./...)
# WSMUX/1's conformance runner knows no Kubernetes; the stand-in cluster knows no wsmux.
bad=$(go list -deps ./conformance | grep -E '^k8s\.io/|/adapters/' | tr '\n' ' ' || true)
if [ -n "$bad" ]; then echo "layering: wireconf reaches $bad"; fail=1; fi
bad=$(go list -deps ./gateway/clustertest | grep -E "^$mod/(mux|adapters)(/|\$)" | tr '\n' ' ' || true)
if [ -n "$bad" ]; then echo "layering: clustertest reaches $bad"; fail=1; fi
exit $fail
