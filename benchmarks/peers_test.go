package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	avast "github.com/avast/retry-go/v5"
	cenkalti "github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	sethvargo "github.com/sethvargo/go-retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
)

// These tests pin what each library does, so that the
// comparison in docs/comparison.md states only observed behaviour. Each runs in a synctest
// bubble: every library sleeps on the runtime's timers, which the bubble
// fakes, so a 10s wait takes no real time and elapsed times are exact.

var (
	errBoom     = errors.New("boom")
	errDeclined = errors.New("declined")
)

// library runs an operation under one library's policy.
type library struct {
	name string
	// do allows attempts attempts in all, waiting wait after each failure
	// (no jitter), with ctx as the caller's context.
	do func(ctx context.Context, attempts int, wait time.Duration, fn op) error
	// transient and permanent mark an error the library's way as worth
	// another attempt, or not.
	transient, permanent func(error) error
}

func identity(err error) error { return err }

var libraries = []library{
	{
		name: "steadfast",
		do: func(ctx context.Context, attempts int, wait time.Duration, fn op) error {
			return retry.Do(ctx, fn, retry.WithMaxAttempts(attempts),
				retry.WithBackoff(retry.Constant(wait)), retry.WithJitter(retry.NoJitter))
		},
		transient: identity,
		permanent: retry.Permanent,
	},
	{
		name: "cenkalti/backoff/v5",
		do: func(ctx context.Context, attempts int, wait time.Duration, fn op) error {
			_, err := cenkalti.Retry(ctx, func() (struct{}, error) { return struct{}{}, fn(ctx) },
				cenkalti.WithBackOff(cenkalti.NewConstantBackOff(wait)), cenkalti.WithMaxTries(uint(attempts)))
			return err
		},
		transient: identity,
		permanent: cenkalti.Permanent,
	},
	{
		name: "avast/retry-go/v5",
		do: func(ctx context.Context, attempts int, wait time.Duration, fn op) error {
			return avast.New(avast.Context(ctx), avast.Attempts(uint(attempts)),
				avast.Delay(wait), avast.DelayType(avast.FixedDelay)).
				Do(func() error { return fn(ctx) })
		},
		transient: identity,
		permanent: avast.Unrecoverable,
	},
	{
		// Retries only errors marked RetryableError: an unmarked error
		// is permanent.
		name: "sethvargo/go-retry",
		do: func(ctx context.Context, attempts int, wait time.Duration, fn op) error {
			b := sethvargo.WithMaxRetries(uint64(attempts-1), sethvargo.NewConstant(wait))
			return sethvargo.Do(ctx, b, fn)
		},
		transient: sethvargo.RetryableError,
		permanent: identity,
	},
	{
		// Has no error marker: the policy names the errors to abort on,
		// matched with errors.Is.
		name: "failsafe-go",
		do: func(ctx context.Context, attempts int, wait time.Duration, fn op) error {
			rp := retrypolicy.NewBuilder[any]().WithMaxAttempts(attempts).WithDelay(wait).
				AbortOnErrors(errDeclined).Build()
			return failsafe.With[any](rp).WithContext(ctx).Run(func() error { return fn(ctx) })
		},
		transient: identity,
		permanent: identity,
	},
}

// outcome is what a test observes of one call.
type outcome struct {
	Calls   int           // attempts made
	Elapsed time.Duration // fake time from the call to its return
	IsLast  bool          // errors.Is(err, the last attempt's error)
	IsCtx   bool          // errors.Is(err, the context's error)
}

// observe runs the library once in a synctest bubble. ctxFor derives the
// caller's context; fail is the error every attempt returns.
func observe(t *testing.T, lib library, attempts int, wait time.Duration,
	ctxFor func(context.Context) (context.Context, context.CancelFunc), fail error,
) (outcome, error) {
	t.Helper()
	var (
		got outcome
		err error
	)
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := ctxFor(t.Context())
		defer cancel()
		start := time.Now()
		err = lib.do(ctx, attempts, wait, func(context.Context) error {
			got.Calls++
			return fail
		})
		got.Elapsed = time.Since(start)
		got.IsCtx = ctx.Err() != nil && errors.Is(err, ctx.Err())
	})
	return got, err
}

// TestPeers_sleepsPastDeadline: the context has 1s left and the next wait
// is 10s. A library that reads the deadline returns at once; the others
// sleep until the deadline fires.
func TestPeers_sleepsPastDeadline(t *testing.T) {
	want := map[string]outcome{
		"steadfast":           {Calls: 1, Elapsed: 0, IsLast: true, IsCtx: false},
		"cenkalti/backoff/v5": {Calls: 1, Elapsed: time.Second, IsLast: false, IsCtx: true},
		"avast/retry-go/v5":   {Calls: 1, Elapsed: time.Second, IsLast: true, IsCtx: true},
		"sethvargo/go-retry":  {Calls: 1, Elapsed: time.Second, IsLast: false, IsCtx: true},
		"failsafe-go":         {Calls: 1, Elapsed: time.Second, IsLast: false, IsCtx: true},
	}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			deadline := func(ctx context.Context) (context.Context, context.CancelFunc) {
				return context.WithTimeout(ctx, time.Second)
			}
			fail := lib.transient(errBoom)
			got, err := observe(t, lib, 3, 10*time.Second, deadline, fail)
			require.Error(t, err)
			got.IsLast = errors.Is(err, errBoom)
			assert.Equal(t, want[lib.name], got, "err: %v", err)
			if lib.name == "steadfast" {
				// The context had not expired yet, but the cause says why
				// Do gave up.
				assert.ErrorIs(t, err, context.DeadlineExceeded)
			}
		})
	}
}

// TestPeers_cancelDuringWaitKeepsLastError: the caller cancels the
// context 2s into a 10s wait. Does the error still match the last
// attempt's error?
func TestPeers_cancelDuringWaitKeepsLastError(t *testing.T) {
	want := map[string]outcome{
		"steadfast":           {Calls: 1, Elapsed: 2 * time.Second, IsLast: true, IsCtx: true},
		"cenkalti/backoff/v5": {Calls: 1, Elapsed: 2 * time.Second, IsLast: false, IsCtx: true},
		"avast/retry-go/v5":   {Calls: 1, Elapsed: 2 * time.Second, IsLast: true, IsCtx: true},
		"sethvargo/go-retry":  {Calls: 1, Elapsed: 2 * time.Second, IsLast: false, IsCtx: true},
		"failsafe-go":         {Calls: 1, Elapsed: 2 * time.Second, IsLast: false, IsCtx: true},
	}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			cancelAt2s := func(ctx context.Context) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(ctx)
				time.AfterFunc(2*time.Second, cancel)
				return ctx, cancel
			}
			got, err := observe(t, lib, 3, 10*time.Second, cancelAt2s, lib.transient(errBoom))
			require.Error(t, err)
			got.IsLast = errors.Is(err, errBoom)
			assert.Equal(t, want[lib.name], got, "err: %v", err)
		})
	}
}

// TestPeers_permanentWrappedStopsAtOnce: the operation returns its
// library's permanent marker wrapped with fmt.Errorf's %w, as code that
// adds context to errors does. Every library stops after one attempt;
// the returned message shows what each keeps of the wrapping.
func TestPeers_permanentWrappedStopsAtOnce(t *testing.T) {
	wantMsg := map[string]string{
		"steadfast":           "retry: permanent error after 1 attempt: charge card: declined",
		"cenkalti/backoff/v5": "declined", // Retry returns the marker's inner error
		"avast/retry-go/v5":   "All attempts fail:\n#1: charge card: declined",
		"sethvargo/go-retry":  "charge card: declined",
		"failsafe-go":         "charge card: declined",
	}
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			fail := fmt.Errorf("charge card: %w", lib.permanent(errDeclined))
			noDeadline := func(ctx context.Context) (context.Context, context.CancelFunc) {
				return context.WithCancel(ctx)
			}
			got, err := observe(t, lib, 3, time.Second, noDeadline, fail)
			require.Error(t, err)
			assert.Equal(t, outcome{Calls: 1}, got)
			assert.ErrorIs(t, err, errDeclined)
			assert.Equal(t, wantMsg[lib.name], err.Error())
		})
	}
}

// timerFunc adapts a function to avast's Timer interface.
type timerFunc func(time.Duration) <-chan time.Time

func (f timerFunc) After(d time.Duration) <-chan time.Time { return f(d) }

// TestAvast_withTimerReplacesTheSleep: of the peers, only avast/retry-go
// has a public hook for time, WithTimer, and it covers the wait between
// attempts (an After function), not a clock. cenkalti/backoff v5 keeps
// its timer option unexported, and sethvargo/go-retry and failsafe-go's
// retry policy have none.
func TestAvast_withTimerReplacesTheSleep(t *testing.T) {
	var waits []time.Duration
	fake := timerFunc(func(d time.Duration) <-chan time.Time {
		waits = append(waits, d)
		c := make(chan time.Time, 1)
		c <- time.Time{}
		return c
	})
	err := avast.New(avast.Attempts(3), avast.Delay(time.Hour), avast.DelayType(avast.FixedDelay),
		avast.WithTimer(fake)).Do(func() error { return errBoom })
	require.ErrorIs(t, err, errBoom)
	assert.Equal(t, []time.Duration{time.Hour, time.Hour}, waits)
}
