#!/usr/bin/env bash
# Runs every benchmark but ParkedCalls and PGTransfers (run them on their own: see
# BENCHMARKS.md) 10 times in one process, so all libraries share the
# machine's state, then summarizes with benchstat (medians and 95%
# confidence intervals) and writes a markdown table with each median's
# ratio to BenchmarkDirect.
# Usage: benchmarks/bench.sh [extra go test flags, e.g. -benchtime 2s]
# Output: benchmarks/results/{bench.txt,benchstat.txt,table.md}
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p results
benchstat="go run golang.org/x/perf/cmd/benchstat@latest"

go test -run '^$' -bench . -skip 'ParkedCalls|PGTransfers' -benchmem -count 10 "$@" | tee results/bench.txt
$benchstat results/bench.txt > results/benchstat.txt
$benchstat -format csv results/bench.txt 2>/dev/null | awk -F, '
	/^,/ { unit = $2; next }                 # a new metric section
	NF >= 3 && $1 != "geomean" {
		name = $1; sub(/-[0-9]+$/, "", name)  # drop the GOMAXPROCS suffix
		if (!(name in seen)) { seen[name] = 1; order[++n] = name }
		val[name, unit] = $2; ci[name, unit] = $3
	}
	END {
		direct = val["Direct", "sec/op"]
		print "| Benchmark | ns/op (median ± 95% CI) | × Direct | B/op | allocs/op |"
		print "|---|---:|---:|---:|---:|"
		for (i = 1; i <= n; i++) {
			b = order[i]
			printf "| %s | %.1f ± %s | %.1f | %d | %d |\n", b, val[b, "sec/op"] * 1e9, ci[b, "sec/op"],
				val[b, "sec/op"] / direct, val[b, "B/op"], val[b, "allocs/op"]
		}
	}' > results/table.md
cat results/benchstat.txt results/table.md
