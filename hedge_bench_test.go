package retry_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrytest/parkcost"
)

// BenchmarkHedge measures what a hedged call adds, with the options a
// user writes for it (a fixed delay, or WithHedge(nil)'s adaptive one,
// with New's budget), beside Do of the same Retrier and beside a
// hand-written hedge of the same fn: _answersInTime is a call whose one
// attempt answers within the delay (an armed and stopped timer, no
// goroutine); _hedgeWins one whose first attempt answers only once
// cancelled, and whose hedge, after a delay of 1µs, answers at once: one
// goroutine, two attempt contexts. It has no budget, which would refuse
// hedges sent by every call, as it should.
func BenchmarkHedge(b *testing.B) {
	ctx := context.Background()
	r := mustNew(b, retry.WithHedge(&retry.HedgeOptions{Delay: 10 * time.Millisecond}))
	adaptive := mustNew(b, retry.WithHedge(nil))
	for range 1000 { // the window warms up: the delay is known, MinDelay
		sink = adaptive.Hedge(ctx, succeedFn)
	}
	fast := mustNew(b, retry.WithHedge(&retry.HedgeOptions{Delay: time.Microsecond}), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Do", func() error { return r.Do(ctx, succeedFn) }},
		{"handWritten_answersInTime", func() error { return handHedgeOnce(ctx, succeedFn) }},
		{"answersInTime", func() error { return r.Hedge(ctx, succeedFn) }},
		{"answersInTime_adaptive", func() error { return adaptive.Hedge(ctx, succeedFn) }},
		{"handWritten_hedgeWins", func() error { return handHedgeWins(ctx, firstWaits()) }},
		{"hedgeWins", func() error { return fast.Hedge(ctx, firstWaits()) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink = tc.call()
			}
		})
	}
}

// firstWaits is fn of a call whose first attempt answers only once its
// context ends, and whose others answer at once.
func firstWaits() func(context.Context) error {
	var first atomic.Bool
	return func(ctx context.Context) error {
		if first.CompareAndSwap(false, true) {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
}

// handHedgeWins is the least a hand-written hedge does for a call whose
// hedge, after 1µs, wins: a cancellable context, a time.AfterFunc whose
// goroutine makes the second attempt and, if it succeeds, cancels the
// first, and a channel for its answer. BenchmarkHedge's floor.
func handHedgeWins(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	second := make(chan error, 1)
	t := time.AfterFunc(time.Microsecond, func() {
		err := fn(ctx)
		if err == nil {
			cancel()
		}
		second <- err
	})
	if err := fn(ctx); err == nil || t.Stop() {
		return err
	}
	return <-second
}

// BenchmarkParkedHedges parks 100,000 hedged calls with both attempts in
// flight (each blocks until the shared context ends), and reports what a
// call holds, its two goroutines included, beside the floor: a
// hand-written hedge (the first attempt on the caller's goroutine, a
// time.AfterFunc that starts the second), measured the same way.
func BenchmarkParkedHedges(b *testing.B) {
	const n = 100_000
	r := mustNew(b, retry.WithHedge(&retry.HedgeOptions{Delay: time.Millisecond}), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}),
		retry.WithMaxAttempts(2))
	ours := func(ctx context.Context) error { return r.Hedge(ctx, blockedAttempt) }
	measureParkedHedges(b, n, ours) // warm up
	for b.Loop() {
		got := measureParkedHedges(b, n, ours)
		floor := measureParkedHedges(b, n, handHedge)
		got.Report(b, "")
		floor.Report(b, "floor-")
		b.ReportMetric(got.Total()/floor.Total(), "x-floor-total")
	}
}

// measureParkedHedges parks n calls of call, each with two attempts of
// blockedAttempt in flight, and measures what they hold.
func measureParkedHedges(tb testing.TB, n int, call func(context.Context) error) parkcost.Cost {
	tb.Helper()
	parkedAttempts.Store(0)
	before := parkcost.Waiting()
	c, err := parkcost.Measure(n, call, func() {
		for deadline := time.Now().Add(time.Minute); parkedAttempts.Load() < int64(2*n) ||
			parkcost.Waiting() < before+parkcost.Ballast+uint64(2*n); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				tb.Fatalf("not parked after a minute: %d attempts", parkedAttempts.Load())
			}
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// blockedAttempt is an attempt that answers only when its context ends.
func blockedAttempt(ctx context.Context) error {
	parkedAttempts.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

// handHedge is the least a hand-written hedge of blockedAttempt does: the
// second attempt after 1ms on a timer's goroutine, the first answer wins.
func handHedge(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	second := make(chan error, 1)
	t := time.AfterFunc(time.Millisecond, func() { second <- blockedAttempt(ctx) })
	defer t.Stop()
	err := blockedAttempt(ctx)
	if err == nil {
		return nil
	}
	if t.Stop() {
		return err
	}
	return <-second
}

// handHedgeOnce is the least a hand-written hedge does for a call whose
// one attempt answers within the delay: a cancellable context for it, and
// a timer armed and stopped. BenchmarkHedge's floor.
func handHedgeOnce(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := time.AfterFunc(10*time.Millisecond, func() { _ = fn(ctx) })
	defer t.Stop()
	return fn(ctx)
}
