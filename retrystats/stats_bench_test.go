package retrystats_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrystats"
)

// BenchmarkObserverCost measures a first-try success through a prebuilt
// Retrier with no observer, with Stats, and with an observer that does
// nothing (what Do itself spends on observing: the clock reads).
//
// The floor cases have no observer; their fn does the least that any
// stats must do per call, so they show what a budget relative to "none"
// can hold: one shared counter, or the two monotonic clock reads that a
// call duration needs.
func BenchmarkObserverCost(b *testing.B) {
	var counter, counter2 atomic.Uint64
	epoch := time.Now()
	cases := []struct {
		name string
		opts []retry.Option
		fn   func(context.Context) error
	}{
		{name: "none"},
		{name: "stats", opts: []retry.Option{retry.WithObserver(new(retrystats.Stats))}},
		{name: "noop", opts: []retry.Option{retry.WithObserver(noopObserver{})}},
		{name: "floor=one-counter", fn: func(context.Context) error {
			counter.Add(1)
			return nil
		}},
		{name: "floor=two-counters", fn: func(context.Context) error {
			counter.Add(1)
			counter2.Add(1)
			return nil
		}},
		{name: "floor=two-clock-reads", fn: func(context.Context) error {
			if time.Since(epoch) > time.Since(epoch) {
				return errors.New("monotonic clock went backwards")
			}
			return nil
		}},
	}
	for _, tc := range cases {
		fn := tc.fn
		if fn == nil {
			fn = func(context.Context) error { return nil }
		}
		b.Run(tc.name, func(b *testing.B) {
			r, err := retry.New(tc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_ = r.Do(ctx, fn)
			}
		})
	}
}

// BenchmarkStatsParallel is a first-try success with Stats from every
// CPU at once: the counters are shared, so this shows their contention.
func BenchmarkStatsParallel(b *testing.B) {
	r, err := retry.New(retry.WithObserver(new(retrystats.Stats)))
	if err != nil {
		b.Fatal(err)
	}
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			_ = r.Do(ctx, fn)
		}
	})
}

type noopObserver struct{}

func (noopObserver) OnAttemptStart(context.Context, retry.AttemptStart) {}
func (noopObserver) OnAttemptEnd(context.Context, retry.AttemptEnd)     {}
func (noopObserver) OnRetry(context.Context, retry.Scheduled)           {}
func (noopObserver) OnWaitEnd(context.Context, retry.WaitEnd)           {}
func (noopObserver) OnDone(context.Context, retry.Done)                 {}
