#!/usr/bin/env bash
# Enforces the layering of README.md's Layout table: frame and flow import nothing of the project,
# mux never reaches Kubernetes or the adapters.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
fail=0
for p in frame flow; do
  bad=$(go list -deps "./$p/" | grep "^$mod/" | grep -v "^$mod/$p\$" || true)
  if [ -n "$bad" ]; then echo "layering: $p imports $bad"; fail=1; fi
done
if [ -d mux ]; then
  bad=$(go list -deps ./mux/... | grep -E '^k8s\.io/|/adapters/' || true)
  if [ -n "$bad" ]; then echo "layering: mux reaches $bad"; fail=1; fi
fi
exit $fail
