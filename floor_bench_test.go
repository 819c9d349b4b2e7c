package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The floor of BenchmarkRetrierDo_threeFailuresZeroWaits: the least any
// loop does that returns what Do returns for three failures and a success
// with zero waits. BenchmarkHandLoop_threeFailures calls fn and nothing
// else; Do must also, per attempt, check its context before calling fn
// (a done context means no attempt), call fn through the generic loop's
// adapter (unit: Do and DoValue share one loop over func(ctx) (T, error)),
// and per failed attempt classify the error (Permanent, After, an inner
// *Error, context.Canceled anywhere in the chain) and look at the context
// again (a done context stops the call at once, with another outcome).
// This benchmark does exactly that, with the library's own classify, in a
// hand-written loop: no config, no call state, no *Error, no waits.

// floorFails fails on the first three of every four calls, as
// threeFailures does in bench_test.go.
type floorFails struct{ n int }

var errFloor = errors.New("transient")

func (f *floorFails) call(context.Context) error {
	f.n++
	if f.n%4 != 0 {
		return errFloor
	}
	return nil
}

// Package variables, so that the calls through them stay indirect.
var (
	floorFn   func(context.Context) (struct{}, error)
	floorSink error
)

func BenchmarkFloor_threeFailures(b *testing.B) {
	ctx := context.Background()
	f := &floorFails{}
	floorFn = unitFn(f.call)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		for attempt := 1; ; attempt++ {
			if ctx.Err() != nil {
				break
			}
			if _, err = floorFn(ctx); err == nil {
				break
			}
			m := classify(err)
			if m.permanent || ctx.Err() != nil || m.canceled || attempt >= 5 {
				break
			}
		}
		floorSink = err
	}
	if floorSink != nil {
		b.Fatal(floorSink)
	}
}

// The floor of BenchmarkDo_threeOptions: what the caller's side of the
// package-level Do costs before Do does anything, building the same three
// Options into the variadic slice and calling a function (kept out of
// line) that calls fn. BenchmarkDirect is the call of fn alone.
func BenchmarkFloor_threeOptions(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		floorSink = floorDo(ctx, floorSucceed,
			WithBackoff(Exponential(100*time.Millisecond, 2, 5*time.Second)),
			WithJitter(FullJitter),
			WithMaxAttempts(5))
	}
}

//go:noinline
func floorDo(ctx context.Context, fn func(context.Context) error, _ ...Option) error {
	return fn(ctx)
}

func floorSucceed(context.Context) error { return nil }
