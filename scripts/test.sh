#!/usr/bin/env bash
# Tests every Go module in the repository: gofmt, go vet, go test -race,
# then go test without -race, where the allocation guards run (the race
# detector allocates on its own, so they skip under it).
# Usage: scripts/test.sh [extra go test flags]
# Redis and PostgreSQL tests skip when no server answers on 127.0.0.1
# (6379, 5432) unless CI=true, where a missing server fails them.
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; status=1
fi

for mod in $(find . -name go.mod -not -path './.git/*' | sort); do
  dir=$(dirname "$mod")
  echo "== $dir"
  (cd "$dir" && go vet ./... && go test -race -count=1 "$@" ./... && go test -count=1 "$@" ./...) || status=1
done

if [ "$status" -ne 0 ]; then
  echo "FAILED"; exit 1
fi
echo "all modules passed"
