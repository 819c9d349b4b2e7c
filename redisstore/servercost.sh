#!/usr/bin/env bash
# Counts the Redis server's instructions per op of a benchmark of
# bench_test.go, which, unlike the time in INFO commandstats, no other load
# on the machine disturbs (BENCHMARKS.md, "Idempotency stores").
#
# Usage: redisstore/servercost.sh TEST_BINARY BENCHMARK N
#   TEST_BINARY  built with: cd redisstore && go test -c -o /tmp/redisstore.test .
#   BENCHMARK    a sub-benchmark, such as FirstTimeKey/impl=store
#   N            its -benchtime, in ops
#
# It starts a redis-server of its own under callgrind (port
# REDIS_COST_PORT, default 6391), counting the instructions of every
# top-level command (processCommand, with the commands a script calls),
# zeroed by CONFIG RESETSTAT and dumped by INFO, which the benchmark sends
# around each timed phase. It prints the instructions per op of each
# timed phase of the N-op run, e.g. "8863 36351" for claim and complete.
# Needs valgrind, redis-server and redis-cli.
set -euo pipefail
bin=$1 bench=$2 n=$3
port=${REDIS_COST_PORT:-6391}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

valgrind --tool=callgrind --collect-atstart=no --toggle-collect=processCommand \
  --zero-before=configResetStatCommand --dump-before=infoCommand \
  --callgrind-out-file="$dir/cg.out" \
  redis-server --port "$port" --save '' --appendonly no >/dev/null 2>&1 &
server=$!
for _ in $(seq 100); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.1
done
RETRY_TEST_REDIS_ADDR=127.0.0.1:$port "$bin" -test.run '^$' \
  -test.bench "^Benchmark$bench\$" -test.benchtime "${n}x" >"$dir/bench.txt" 2>&1 ||
  { cat "$dir/bench.txt" >&2; redis-cli -p "$port" shutdown nosave >/dev/null 2>&1; exit 1; }
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$server" || true

# testing runs the benchmark with b.N = 1, then N: one dump per phase and
# run, in order, so the N-op run's phases are the second half.
mapfile -t dumps < <(ls -v "$dir"/cg.out.*)
half=$(( ${#dumps[@]} / 2 ))
for f in "${dumps[@]:$half}"; do
  awk -v n="$n" '/^(summary|totals):/ { printf "%.0f ", $2 / n; exit }' "$f"
done
echo
