#!/usr/bin/env bash
# Tests every Go module in the repository, each from the workspace
# (go.work), so a change in the root is seen by every module: gofmt, go
# vet, go test -race, then, without -race, the tests that skipped under it
# (the allocation and stack guards: the race detector allocates on its
# own). Every other test has run under -race already, which checks more;
# running it twice doubled the suite's time. It ends with how many tests
# passed, failed and skipped in each module, every skipped test with its
# reason, and a closing line "N passed, N failed, N skipped".
# Usage: scripts/test.sh [extra go test flags]
# Tests that need Redis (127.0.0.1:6379), a Redis Cluster
# (scripts/redis-cluster.sh start), PostgreSQL (127.0.0.1:5432) or
# promtool skip without them, unless CI=true or (for a server) its
# RETRY_TEST_REDIS_ADDR, RETRY_TEST_REDIS_CLUSTER_ADDRS or
# RETRY_TEST_POSTGRES_URL is set: then they fail. Under CI=true so does
# any skip that ci_allowed_skips below does not name.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOWORK="$PWD/go.work"

# The only skips allowed under CI=true, matched against "TestName: reason":
# allocation guards under the race detector, the helper tests that run only
# as a child process of another test, and the tests of skipping itself.
ci_allowed_skips='race detector|runs only as a child process|^TestPoolSkipsWithoutServer/|^TestStartServerSkipsWithoutBinaries/'

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
runs=$work/runs.jsonl
: > "$runs"
(cd scripts/tools && go build -o "$work/testsummary" ./testsummary)
summary=$work/testsummary
note() { "$summary" note -to "$runs" "$@"; }

files=$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*')
unformatted=$(gofmt -l $files)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"
  note "gofmt would change" $unformatted
fi

mods=$(git ls-files '*go.mod' 2>/dev/null | grep -E '(^|/)go\.mod$' || find . -name go.mod -not -path './.git/*')
for mod in $(echo "$mods" | sort); do
  dir=$(dirname "$mod")
  path=$(awk '$1 == "module" { print $2; exit }' "$mod")
  echo "== $dir"
  (cd "$dir" && go vet ./...) || note "go vet in $dir"
  for run in -race "no -race"; do
    flags=(-race ./...)
    if [ "$run" != -race ]; then
      # The tests that skipped for the race detector, in their packages.
      mapfile -t skipped < <("$summary" skipped -module "$path" -run -race -reason 'race' "$runs")
      [ "${#skipped[@]}" -eq 0 ] && continue
      flags=(-run "${skipped[0]}" "${skipped[@]:1}")
    fi
    set +e
    (cd "$dir" && go test -json -count=1 "$@" "${flags[@]}" |
      "$summary" record -to "$runs" -module "$path" -run "$run"
      echo "${PIPESTATUS[0]} ${PIPESTATUS[1]}" > "$work/status")
    set -e
    read -r test_status record_status < "$work/status"
    # A failed test is counted already; a go test that failed with none
    # (say, a go.mod error) is not.
    if [ "$test_status" -ne 0 ] && [ "$record_status" -eq 0 ]; then
      note "go test ($run) in $dir exited with status $test_status"
    fi
  done
done

allow=()
[ "${CI:-}" = true ] && allow=(-allow-skips "$ci_allowed_skips")
exec "$summary" report "${allow[@]}" "$runs"
