#!/usr/bin/env bash
# Prints the repository's Go modules, one folder a line, relative to the root,
# core first (docs/modules.md): the list make, CI and the scripts iterate.
# With --published, only those a release tags (scripts/release.sh) and users
# go get: not the test-only modules below. With --common, those the common
# targets (make test, vet, cross, fuzz, bench-go) iterate: all but the ones
# with a make target of their own (e2e/kube, the real control plane: `make
# e2e-kube`; k8s.io/kubernetes takes minutes to compile, with -race far more).
set -euo pipefail
cd "$(dirname "$0")/.."
unpublished='^(adapters/e2e|e2e/kube|internal/modtest)$'
own_target='^(e2e/kube)$'
all=$(git ls-files -- 'go.mod' '*/go.mod' 2>/dev/null | sed -e 's#/\?go.mod$##' -e 's#^$#.#' |
  sort -t/ -k1,1 | awk '$0=="."{print; next} {rest[++n]=$0} END{for(i=1;i<=n;i++) print rest[i]}')
if [ "${1:-}" = --published ]; then
  echo "$all" | grep -vE "$unpublished"
elif [ "${1:-}" = --common ]; then
  echo "$all" | grep -vE "$own_target"
else
  echo "$all"
fi
