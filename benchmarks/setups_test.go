package benchmarks

import (
	"context"
	"errors"
	"time"

	avast "github.com/avast/retry-go/v5"
	cenkalti "github.com/cenkalti/backoff/v5"
	eapache "github.com/eapache/go-resiliency/retrier"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	sethvargo "github.com/sethvargo/go-retry"

	"github.com/steadfast-go/retry"
)

// errTransient is what a failing attempt returns in the benchmarks.
var errTransient = errors.New("transient")

// op is the operation under test: it gets the caller's context, as our
// library and sethvargo pass it; the other libraries take a func without
// one, so their setups close over ctx, as a caller would.
type op = func(context.Context) error

// setup builds a library's policy once, outside the timed loop, and
// returns the per-call function that runs fn under it. Whatever a caller
// must build per call (options, stateful backoffs, a context binding) is
// built inside the returned function, so it is measured.
//
// Our Retrier's failure setups pass retry.WithOverload(&retry.OverloadOptions{NoBudget: true}): the peers have
// no retry budget, and New's default one would soon refuse the retries of
// a loop that fails on purpose. The first-try success keeps it: that is
// what a user pays.
type setup struct {
	name  string
	build func() func(ctx context.Context, fn op) error
}

// firstTrySetups are the idiomatic ways to call an operation that may
// need 3 attempts, measured on an operation that succeeds at once.
// Delays are the libraries' usual exponential ones; they are never waited.
var firstTrySetups = []setup{
	{"Direct", func() func(context.Context, op) error {
		return func(ctx context.Context, fn op) error { return fn(ctx) }
	}},
	{"Steadfast/Retrier", func() func(context.Context, op) error {
		r, err := retry.New(retry.WithMaxAttempts(3))
		if err != nil {
			panic(err)
		}
		return r.Do
	}},
	{"Steadfast/PackageDo", func() func(context.Context, op) error {
		return func(ctx context.Context, fn op) error {
			return retry.Do(ctx, fn,
				retry.WithBackoff(retry.Exponential(100*time.Millisecond, 2, 10*time.Second)),
				retry.WithMaxAttempts(3),
				retry.WithMaxDelay(10*time.Second),
				retry.WithJitter(retry.FullJitter))
		}
	}},
	{"CenkaltiBackoffV5", func() func(context.Context, op) error {
		// Options are per call; the ExponentialBackOff is stateful and
		// not safe for concurrent use, so Retry builds one per call.
		return func(ctx context.Context, fn op) error {
			_, err := cenkalti.Retry(ctx, func() (struct{}, error) {
				return struct{}{}, fn(ctx)
			}, cenkalti.WithMaxTries(3))
			return err
		}
	}},
	{"AvastV5/Prebuilt", func() func(context.Context, op) error {
		// Valid only when every call shares one context: avast v5 binds
		// the context in New.
		r := avast.New(avast.Attempts(3), avast.Context(context.Background()))
		return func(ctx context.Context, fn op) error {
			return r.Do(func() error { return fn(ctx) })
		}
	}},
	{"AvastV5/PerCallContext", func() func(context.Context, op) error {
		// A per-request context needs a Retrier per call.
		return func(ctx context.Context, fn op) error {
			return avast.New(avast.Attempts(3), avast.Context(ctx)).Do(func() error { return fn(ctx) })
		}
	}},
	{"SethvargoGoRetry", func() func(context.Context, op) error {
		// Backoffs are stateful and cannot be reset, so one per call.
		return func(ctx context.Context, fn op) error {
			b := sethvargo.WithMaxRetries(2, sethvargo.NewExponential(100*time.Millisecond))
			return sethvargo.Do(ctx, b, func(ctx context.Context) error {
				return retryable(fn(ctx))
			})
		}
	}},
	{"EapacheGoResiliency", func() func(context.Context, op) error {
		// A Retrier is safe to share; its backoff list sets the retries.
		r := eapache.New(eapache.ExponentialBackoff(2, 100*time.Millisecond), nil)
		return r.RunCtx
	}},
	{"FailsafeGo", func() func(context.Context, op) error {
		rp := retrypolicy.NewBuilder[any]().
			WithMaxAttempts(3).
			WithBackoff(100*time.Millisecond, 10*time.Second).
			Build()
		exec := failsafe.With[any](rp)
		return func(ctx context.Context, fn op) error {
			return exec.WithContext(ctx).Run(func() error { return fn(ctx) })
		}
	}},
}

// zeroWaitSetups allow 4 attempts with no wait between them, for an
// operation that fails 3 times and then succeeds.
var zeroWaitSetups = []setup{
	{"HandLoop", func() func(context.Context, op) error {
		// The floor: a plain loop of up to 4 calls, no policy, no waits.
		return func(ctx context.Context, fn op) (err error) {
			for range 4 {
				if err = fn(ctx); err == nil {
					return nil
				}
			}
			return err
		}
	}},
	{"Steadfast/Retrier", func() func(context.Context, op) error {
		r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithMaxAttempts(4), retry.WithBackoff(retry.Constant(0)))
		if err != nil {
			panic(err)
		}
		return r.Do
	}},
	{"CenkaltiBackoffV5", func() func(context.Context, op) error {
		zero := &cenkalti.ZeroBackOff{} // stateless, so safe to share
		return func(ctx context.Context, fn op) error {
			_, err := cenkalti.Retry(ctx, func() (struct{}, error) {
				return struct{}{}, fn(ctx)
			}, cenkalti.WithBackOff(zero), cenkalti.WithMaxTries(4))
			return err
		}
	}},
	{"AvastV5/Prebuilt", func() func(context.Context, op) error {
		r := avast.New(avast.Attempts(4), avast.Delay(0), avast.DelayType(avast.FixedDelay),
			avast.Context(context.Background()))
		return func(ctx context.Context, fn op) error {
			return r.Do(func() error { return fn(ctx) })
		}
	}},
	{"SethvargoGoRetry", func() func(context.Context, op) error {
		// NewConstant(0) panics, so a BackoffFunc gives the zero wait.
		return func(ctx context.Context, fn op) error {
			b := sethvargo.WithMaxRetries(3, sethvargo.BackoffFunc(func() (time.Duration, bool) { return 0, false }))
			return sethvargo.Do(ctx, b, func(ctx context.Context) error {
				return retryable(fn(ctx))
			})
		}
	}},
	{"EapacheGoResiliency", func() func(context.Context, op) error {
		r := eapache.New(eapache.ConstantBackoff(3, 0), nil)
		return r.RunCtx
	}},
	{"FailsafeGo", func() func(context.Context, op) error {
		rp := retrypolicy.NewBuilder[any]().WithMaxAttempts(4).Build() // no delay by default
		exec := failsafe.With[any](rp)
		return func(ctx context.Context, fn op) error {
			return exec.WithContext(ctx).Run(func() error { return fn(ctx) })
		}
	}},
}

// retryable marks err for sethvargo/go-retry, which retries only errors
// wrapped in RetryableError.
func retryable(err error) error {
	if err == nil {
		return nil
	}
	return sethvargo.RetryableError(err)
}

// succeed is an operation that succeeds at once.
func succeed(context.Context) error { return nil }

// failThenSucceed returns an operation that fails n times and then
// succeeds, over and over: n failures, one success, n failures...
func failThenSucceed(n int) op {
	calls := 0
	return func(context.Context) error {
		calls++
		if calls%(n+1) != 0 {
			return errTransient
		}
		return nil
	}
}
