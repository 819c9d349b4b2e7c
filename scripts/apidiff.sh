#!/usr/bin/env bash
# Reports the incompatible API changes of every released module since the
# previous release tag, with apidiff (golang.org/x/exp/cmd/apidiff). Before
# v1.0.0 the report is informational; from v1.0.0 on, an incompatible
# change fails. With no release tag before HEAD it says so and exits 0.
# Usage: scripts/apidiff.sh [BASE_TAG]   (default: the newest vX.Y.Z tag before HEAD)
set -euo pipefail
cd "$(dirname "$0")/.."
apidiff_version=v0.0.0-20261113113407-e3970619a1a4
unpublished='^(benchmarks|examples/notify|scripts/tools)$' # as in RELEASING.md

base=${1:-}
if [ -z "$base" ]; then
  base=$(git describe --tags --abbrev=0 --match 'v[0-9]*' HEAD^ 2>/dev/null || true)
fi
if [ -z "$base" ]; then
  echo "apidiff: no release tag (vX.Y.Z) before HEAD, so no API to compare with: skipped"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
GOBIN=$tmp/bin GOWORK=off GOFLAGS=-mod=mod go install "golang.org/x/exp/cmd/apidiff@$apidiff_version"
mkdir "$tmp/old"
git archive "$base" | tar -x -C "$tmp/old"

# The root module's packages alone: in the workspace, its path/... would
# take in every other module's too, and the root needs none of them.
gowork() { if [ "$1" = . ]; then echo off; else echo "$2/go.work"; fi; }

# quiet prints apidiff's errors without its notes on internal packages.
quiet() { grep -v '^Ignoring internal package' >&2 || true; }

incompatible=0
echo "apidiff: incompatible API changes since $base"
for mod in $(git ls-files '*go.mod' | grep -E '(^|/)go\.mod$' | sort); do
  dir=$(dirname "$mod")
  [[ "$dir" =~ $unpublished ]] && continue
  path=$(awk '$1 == "module" { print $2; exit }' "$mod")
  if [ ! -f "$tmp/old/$dir/go.mod" ]; then
    echo "$path: new since $base"
    continue
  fi
  export_data=$tmp/$(echo "$dir" | tr / _).export
  (cd "$tmp/old/$dir" && GOWORK=$(gowork "$dir" "$tmp/old") "$tmp/bin/apidiff" -m -w "$export_data" "$path") 2>"$tmp/stderr" ||
    { quiet <"$tmp/stderr"; exit 1; }
  report=$(work=$(gowork "$dir" "$PWD") && cd "$dir" && GOWORK=$work "$tmp/bin/apidiff" -m -incompatible "$export_data" "$path" 2>"$tmp/stderr") ||
    { quiet <"$tmp/stderr"; exit 1; }
  if [ -z "$report" ]; then
    echo "$path: none"
  else
    incompatible=$((incompatible + 1))
    echo "$path:"
    echo "$report" | sed 's/^/  /'
  fi
done

if [ "$incompatible" -gt 0 ]; then
  case "$base" in
    v0.*) echo "apidiff: $incompatible module(s) changed incompatibly; allowed before v1.0.0, so say so in CHANGELOG.md" ;;
    *) echo "apidiff: $incompatible module(s) changed incompatibly since $base: FAILED"; exit 1 ;;
  esac
fi
