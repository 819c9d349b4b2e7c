package retry_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrystats"
)

// sink keeps results alive so the compiler cannot drop the calls.
var sink error

// succeed is the cheapest possible fn. The baseline calls it through a
// func value, as Do does, so neither side gets it inlined.
func succeed(context.Context) error { return nil }

var succeedFn = succeed

// threeFailures fails on the first three of every four calls.
type threeFailures struct{ n int }

func (f *threeFailures) call(context.Context) error {
	f.n++
	if f.n%4 != 0 {
		return errTransient
	}
	return nil
}

func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates; run without -race")
	}
	ctx := context.Background()
	r := mustNew(t, retry.WithMaxAttempts(5), retry.WithBackoff(retry.Constant(0)))
	f := &threeFailures{}
	value := func(context.Context) (int, error) { return 1, nil }
	cases := []struct {
		name       string
		wantAllocs float64
		fn         func()
	}{
		{"retrier_first_try_success", 0, func() { sink = r.Do(ctx, succeed) }},
		{"retrier_value_first_try_success", 0, func() { _, sink = retry.DoValueOn(ctx, r, value) }},
		{"retrier_three_failures_zero_waits", 0, func() { sink = r.Do(ctx, f.call) }},
		{"package_do_three_options", 0, func() {
			sink = retry.Do(ctx, succeed, retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)), retry.WithJitter(retry.NoJitter))
		}},
		{"backoff_delay", 0, func() {
			_ = retry.Exponential(time.Millisecond, 2, time.Second).Delay(7, 0, 0.5)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := testing.AllocsPerRun(1000, tc.fn)
			assert.LessOrEqual(t, got, tc.wantAllocs)
		})
	}
	require.NoError(t, r.Do(ctx, f.call), "the failing fn still ends in success")
}

func BenchmarkDirect(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		sink = succeedFn(ctx)
	}
}

func BenchmarkRetrierDo_firstTrySuccess(b *testing.B) {
	ctx := context.Background()
	r := mustNew(b)
	b.ReportAllocs()
	for b.Loop() {
		sink = r.Do(ctx, succeedFn)
	}
}

func BenchmarkDo_threeOptions(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		sink = retry.Do(ctx, succeed, retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)), retry.WithJitter(retry.NoJitter))
	}
}

func BenchmarkRetrierDo_threeFailuresZeroWaits(b *testing.B) {
	ctx := context.Background()
	r := mustNew(b, retry.WithMaxAttempts(5), retry.WithBackoff(retry.Constant(0)))
	f := &threeFailures{}
	b.ReportAllocs()
	for b.Loop() {
		sink = r.Do(ctx, f.call)
	}
}

// BenchmarkRetrierDo_parallel shares one Retrier among all goroutines
// (-cpu 1,2 shows the scaling): a first-try success without an observer
// writes no shared memory, so it scales with the cores; with Stats every
// call adds to shared counters. Direct is the floor.
func BenchmarkRetrierDo_parallel(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"direct", func() error { return succeedFn(ctx) }},
		{"no_observer", func() error { return parallelPlain.Do(ctx, succeed) }},
		{"stats", func() error { return parallelStats.Do(ctx, succeed) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var err error
				for pb.Next() {
					err = tc.do()
				}
				if err != nil {
					b.Error(err)
				}
			})
		})
	}
}

var (
	parallelPlain = func() *retry.Retrier { r, _ := retry.New(); return r }()
	parallelStats = func() *retry.Retrier { r, _ := retry.New(retry.WithObserver(new(retrystats.Stats))); return r }()
)

// BenchmarkHandLoop_threeFailures is the floor of the one above: a
// hand-written loop of the same four calls, with no waits, calling fn
// through a func value as Do does (so the compiler cannot inline it away).
func BenchmarkHandLoop_threeFailures(b *testing.B) {
	ctx := context.Background()
	f := &threeFailures{}
	handFn = f.call
	b.ReportAllocs()
	for b.Loop() {
		var err error
		for range 5 {
			if err = handFn(ctx); err == nil {
				break
			}
		}
		sink = err
	}
}

// handFn is a package variable so that calls through it stay indirect.
var handFn func(context.Context) error

// BenchmarkParkedCalls parks 100,000 calls in a one-hour wait and reports
// the heap each holds beyond a goroutine that parks on the same context
// without Do (goroutine stacks are not heap either way). It then cancels
// the shared context and reports how long it takes until all have
// returned, for Do and for the plain goroutines.
//
// The floor is the least a hand-written wait does for the same result: a
// time.Timer, a select on it and ctx.Done(), and context.Cause once the
// context is done.
func BenchmarkParkedCalls(b *testing.B) {
	const n = 100_000
	plain := func(parked *sync.WaitGroup) func(context.Context) error {
		return func(ctx context.Context) error {
			_ = failOnce(ctx)
			parked.Done()
			<-ctx.Done()
			return ctx.Err()
		}
	}
	// Warm up: the first 100,000 goroutines grow runtime tables that later
	// runs reuse, which would otherwise count against the baseline.
	parkedHeap(b, n, plain)
	for b.Loop() {
		base, baseElapsed := parkedHeap(b, n, plain)
		withDo, elapsed := parkedHeap(b, n, func(parked *sync.WaitGroup) func(context.Context) error {
			r := mustNew(b, retry.WithBackoff(retry.Constant(time.Hour)), retry.WithMaxAttempts(2),
				retry.WithWaitArmed(func(time.Duration) { parked.Done() }))
			return func(ctx context.Context) error { return r.Do(ctx, failOnce) }
		})
		floor, floorElapsed := parkedHeap(b, n, func(parked *sync.WaitGroup) func(context.Context) error {
			return func(ctx context.Context) error {
				_ = failOnce(ctx)
				t := time.NewTimer(time.Hour)
				defer t.Stop()
				parked.Done()
				select {
				case <-t.C:
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
		})
		b.ReportMetric((withDo-base)/n, "heap-B/parked-call")
		b.ReportMetric((floor-base)/n, "floor-heap-B/parked-call")
		b.ReportMetric(float64(elapsed.Milliseconds()), "ms-to-return-all")
		b.ReportMetric(float64(floorElapsed.Milliseconds()), "floor-ms-to-return-all")
		b.ReportMetric(float64(baseElapsed.Milliseconds()), "baseline-ms-to-return-all")
	}
}

// parkedHeap runs n goroutines of the call that prepare builds and waits
// until all have marked themselves parked. It returns the heap they hold
// and how long they take to return, each with an error, once their shared
// context is cancelled.
func parkedHeap(b *testing.B, n int, prepare func(parked *sync.WaitGroup) func(context.Context) error) (float64, time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var parked, returned sync.WaitGroup
	parked.Add(n)
	returned.Add(n)
	call := prepare(&parked)
	var failed atomic.Int64
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		go func() {
			defer returned.Done()
			if call(ctx) != nil {
				failed.Add(1)
			}
		}()
	}
	parked.Wait()
	runtime.GC()
	runtime.ReadMemStats(&after)
	start := time.Now()
	cancel()
	returned.Wait()
	elapsed := time.Since(start)
	if failed.Load() != int64(n) {
		b.Fatalf("%d of %d calls returned an error", failed.Load(), n)
	}
	return float64(after.HeapAlloc) - float64(before.HeapAlloc), elapsed
}

func failOnce(context.Context) error { return errTransient }
