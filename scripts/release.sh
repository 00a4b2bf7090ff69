#!/usr/bin/env bash
# Tags a release of every published module (docs/modules.md): makes a commit on top of the current
# one in which each published go.mod requires its wsmux siblings at VERSION and has no replace
# directive, tags it VERSION (the core) and DIR/VERSION (the others), and returns to the branch.
# Pushing is left to you: it prints the command.
#
# Usage: bash scripts/release.sh vX.Y.Z
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: scripts/release.sh vX.Y.Z}
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || { echo "release: $version is not a semantic version (vX.Y.Z)"; exit 2; }
[ -z "$(git status --porcelain)" ] || { echo "release: the work tree has changes; commit or stash them first"; exit 1; }
mapfile -t published < <(bash scripts/modules.sh --published)
branch=$(git rev-parse --abbrev-ref HEAD)
base=$(git rev-parse HEAD)
git switch --quiet --detach
trap 'git switch --quiet "$branch"' EXIT
for dir in "${published[@]}"; do
  (
    cd "$dir"
    for r in $(go mod edit -json | python3 -c 'import json,sys; [print(r["Path"]) for r in (json.load(sys.stdin).get("Require") or []) if r["Path"].startswith("github.com/wsmux/wsmux")]'); do
      go mod edit -require="$r@$version"
    done
    for r in $(go mod edit -json | python3 -c 'import json,sys; [print(r["Old"]["Path"]) for r in (json.load(sys.stdin).get("Replace") or [])]'); do
      go mod edit -dropreplace="$r"
    done
  )
done
git commit --quiet -am "release $version: published modules require their siblings at $version, without replace directives"
tags=()
for dir in "${published[@]}"; do
  if [ "$dir" = . ]; then tag=$version; else tag=$dir/$version; fi
  git tag -a "$tag" -m "wsmux $version ($dir)"
  tags+=("$tag")
done
echo "release: tagged $(git rev-parse --short HEAD) (on top of ${base:0:12}) as ${tags[*]}"
echo "push with: git push origin ${tags[*]}"
