package benchmarks

import (
	"context"
	"testing"
)

// BenchmarkDirect calls the operation with no retry library: the
// baseline every other benchmark is compared with.
func BenchmarkDirect(b *testing.B) {
	run(b, firstTrySetups[0], succeed)
}

// BenchmarkFirstTry measures a call whose first attempt succeeds, the
// common case on a hot path.
func BenchmarkFirstTry(b *testing.B) {
	for _, s := range firstTrySetups[1:] {
		b.Run(s.name, func(b *testing.B) { run(b, s, succeed) })
	}
}

// BenchmarkThreeFailures measures 3 failed attempts then a success, with
// zero waits, so the figure is the libraries' own bookkeeping. HandLoop,
// a plain loop of 4 calls, is the floor for this shape.
func BenchmarkThreeFailures(b *testing.B) {
	for _, s := range zeroWaitSetups {
		b.Run(s.name, func(b *testing.B) { run(b, s, failThenSucceed(3)) })
	}
}

func run(b *testing.B, s setup, fn op) {
	call := s.build()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := call(ctx, fn); err != nil {
			b.Fatal(err)
		}
	}
}
