package benchmarks

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	cenkalti "github.com/cenkalti/backoff/v5"
	eapache "github.com/eapache/go-resiliency/retrier"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrytest/parkcost"
)

// parkedSetup is one way to make a call that fails once and then waits an
// hour before its second and last attempt, until its context is done.
type parkedSetup struct {
	name string
	// build returns the call; fn is the operation, which fails.
	build func() func(ctx context.Context, fn op) error
	// transient marks fn's error the library's way as worth another
	// attempt.
	transient func(error) error
}

// parkedSetups are ours and the peers' (set up as in libraries), plus the
// two references every row is measured beside: the floor, a hand-written
// wait (a time.Timer, a select on it and ctx.Done(), context.Cause), and
// the bare goroutine, which parks on ctx.Done() after the failed call.
var parkedSetups = func() []parkedSetup {
	lib := func(name string) library {
		for _, l := range libraries {
			if l.name == name {
				return l
			}
		}
		panic("no library " + name)
	}
	peer := func(name, libName string) parkedSetup {
		l := lib(libName)
		return parkedSetup{name: name, transient: l.transient, build: func() func(context.Context, op) error {
			return func(ctx context.Context, fn op) error { return l.do(ctx, 2, time.Hour, fn) }
		}}
	}
	return []parkedSetup{
		{name: "Floor", transient: identity, build: func() func(context.Context, op) error {
			return func(ctx context.Context, fn op) error {
				_ = fn(ctx)
				t := time.NewTimer(time.Hour)
				defer t.Stop()
				select {
				case <-t.C:
					return fn(ctx)
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
		}},
		{name: "Goroutine", transient: identity, build: func() func(context.Context, op) error {
			return func(ctx context.Context, fn op) error {
				_ = fn(ctx)
				<-ctx.Done()
				return ctx.Err()
			}
		}},
		{name: "Steadfast/Retrier", transient: identity, build: func() func(context.Context, op) error {
			r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithMaxAttempts(2), retry.WithBackoff(retry.Constant(time.Hour)),
				retry.WithJitter(retry.NoJitter))
			if err != nil {
				panic(err)
			}
			return r.Do
		}},
		peer("Steadfast/PackageDo", "steadfast"),
		{name: "CenkaltiBackoffV5", transient: identity, build: func() func(context.Context, op) error {
			// As in libraries, but without its default 15 min limit on
			// the whole call, which would stop it before the wait.
			return func(ctx context.Context, fn op) error {
				_, err := cenkalti.Retry(ctx, func() (struct{}, error) { return struct{}{}, fn(ctx) },
					cenkalti.WithBackOff(cenkalti.NewConstantBackOff(time.Hour)), cenkalti.WithMaxTries(2),
					cenkalti.WithMaxElapsedTime(0))
				return err
			}
		}},
		peer("AvastV5", "avast/retry-go/v5"),
		peer("SethvargoGoRetry", "sethvargo/go-retry"),
		peer("FailsafeGo", "failsafe-go"),
		{name: "EapacheGoResiliency", transient: identity, build: func() func(context.Context, op) error {
			return eapache.New(eapache.ConstantBackoff(1, time.Hour), nil).RunCtx
		}},
	}
}()

// BenchmarkParkedCalls parks 100,000 calls of each library in its wait
// after one failed attempt and reports, once all are parked and a GC has
// run, what each holds: its live heap and its goroutine's stack,
// separately (a stack is not heap). Then it cancels their shared context
// and reports how long it takes until all have returned. The floor and
// the bare goroutine (see parkedSetups) are measured in the same
// iteration, and the ratios are to the floor.
func BenchmarkParkedCalls(b *testing.B) {
	const n = 100_000
	floor, bare := parkedSetups[0], parkedSetups[1]
	// Warm up: the first 100,000 goroutines grow runtime tables that later
	// runs reuse.
	measureParked(b, n, bare)
	for _, s := range parkedSetups[2:] {
		b.Run(s.name, func(b *testing.B) {
			for b.Loop() {
				got := measureParked(b, n, s)
				f := measureParked(b, n, floor)
				g := measureParked(b, n, bare)
				got.Report(b, "")
				f.Report(b, "floor-")
				g.Report(b, "goroutine-")
				b.ReportMetric(got.Total()/f.Total(), "x-floor-total")
				b.ReportMetric(float64(got.Returned)/float64(f.Returned), "x-floor-return")
			}
		})
	}
}

// measureParked measures n calls of s. The peers have no hook at the
// start of a wait, so "parked" is read from the scheduler: every call has
// made its first attempt, and all n goroutines (and the ballast) wait.
func measureParked(b *testing.B, n int, s parkedSetup) parkcost.Cost {
	call := s.build()
	fail := s.transient(errTransient)
	var attempts atomic.Int64
	fn := func(context.Context) error {
		attempts.Add(1)
		return fail
	}
	parked := func() {
		for deadline := time.Now().Add(time.Minute); attempts.Load() < int64(n) || parkcost.Waiting() < uint64(n+parkcost.Ballast); {
			if time.Now().After(deadline) {
				b.Fatalf("%s: not parked after a minute: %d of %d attempts", s.name, attempts.Load(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	c, err := parkcost.Measure(n, func(ctx context.Context) error { return call(ctx, fn) }, parked)
	if err != nil {
		b.Fatalf("%s: %v", s.name, err)
	}
	if attempts.Load() != int64(n) {
		b.Fatalf("%s: %d attempts for %d calls", s.name, attempts.Load(), n)
	}
	return c
}
