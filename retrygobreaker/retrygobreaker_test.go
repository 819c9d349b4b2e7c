package retrygobreaker_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrygobreaker"
	"github.com/steadfast-go/retry/retrystats"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errDown = errors.New("connection refused")

// newBreaker adapts a gobreaker breaker built from st, and returns both,
// so that tests can read the breaker's state and counts.
func newBreaker(t *testing.T, st gobreaker.Settings) (*retrygobreaker.Breaker, *gobreaker.TwoStepCircuitBreaker[struct{}]) {
	t.Helper()
	if st.IsExcluded == nil {
		st.IsExcluded = retrygobreaker.Excluded // as New's documentation asks
	}
	cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](st)
	b, err := retrygobreaker.New(cb)
	require.NoError(t, err)
	return b, cb
}

// tripAfter opens the breaker at the nth consecutive failed attempt.
func tripAfter(n uint32) func(gobreaker.Counts) bool {
	return func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= n }
}

// newRetrier retries every second, without jitter or budget, so that fn
// calls and waits can be counted exactly.
func newRetrier(t *testing.T, b overload.Breaker, attempts int) *retry.Retrier {
	t.Helper()
	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Breaker: b, NoBudget: true}), retry.WithMaxAttempts(attempts),
		retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter))
	require.NoError(t, err)
	return r
}

// downstream is a fn that fails while down is set, and counts its calls.
type downstream struct {
	down  atomic.Bool
	calls atomic.Int64
}

func (d *downstream) fn(context.Context) error {
	d.calls.Add(1)
	if d.down.Load() {
		return errDown
	}
	return nil
}

// refusedBy asserts that err is Do's error for a call the breaker
// refused after attempts real attempts, and returns it.
func refusedBy(t *testing.T, err error, state error, attempts int) *retry.Error {
	t.Helper()
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.OutcomeRefused, re.Outcome)
	assert.Equal(t, attempts, re.Attempts, "only attempts that called fn count")
	assert.ErrorIs(t, err, overload.ErrCircuitOpen)
	assert.ErrorIs(t, err, state)
	return re
}

func TestBadInput(t *testing.T) {
	_, err := retrygobreaker.New[struct{}](nil)
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.Contains(t, err.Error(), "the breaker is nil")

	_, err = retry.New(retry.WithOverload(&retry.OverloadOptions{Breaker: (*retrygobreaker.Breaker)(nil)}))
	require.ErrorIs(t, err, retry.ErrInvalidOption, "WithOverload refuses a nil *Breaker")

	for name, b := range map[string]*retrygobreaker.Breaker{"nil": nil, "zero": {}} {
		done, err := b.Allow()
		assert.Nil(t, done, name)
		require.ErrorIs(t, err, retry.ErrInvalidOption, name)
		assert.Contains(t, err.Error(), "build one with New or NewBreaker", name)
		assert.NotErrorIs(t, err, overload.ErrCircuitOpen, name)
	}

	// The zero Breaker gets past WithOverload; it refuses every attempt
	// with the reason instead of panicking.
	var d downstream
	err = retry.Do(context.Background(), d.fn, retry.WithOverload(&retry.OverloadOptions{Breaker: &retrygobreaker.Breaker{}}))
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.OutcomeRefused, re.Outcome)
	assert.Zero(t, d.calls.Load())
}

// TestLifecycle takes one breaker from closed to open to half-open and
// back to closed through retry.Do, counting every call of fn and every
// second of (virtual) time spent.
func TestLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, cb := newBreaker(t, gobreaker.Settings{
			Name:        "payments",
			MaxRequests: 2,
			Timeout:     30 * time.Second,
			ReadyToTrip: tripAfter(3),
		})
		r := newRetrier(t, b, 5)
		ctx := context.Background()
		var d downstream
		d.down.Store(true)

		// Closed: the third failed attempt trips the breaker, and the
		// fourth is refused without a call of fn. The call keeps the last
		// real error.
		start := time.Now()
		err := r.Do(ctx, d.fn)
		re := refusedBy(t, err, gobreaker.ErrOpenState, 3)
		assert.Same(t, errDown, re.Last)
		assert.ErrorIs(t, err, errDown)
		assert.Equal(t, int64(3), d.calls.Load())
		assert.Equal(t, gobreaker.StateOpen, cb.State())
		// Two waits (after attempts 1 and 2); the tripping attempt's is
		// not spent: Do asks the breaker (Refuses) before each wait.
		assert.Equal(t, 2*time.Second, time.Since(start))
		assert.Equal(t, `retry: circuit open: breaker "payments" is open after 3 attempts: connection refused`, err.Error())

		// Open: a new call is refused before its first attempt, at once.
		start = time.Now()
		err = r.Do(ctx, d.fn)
		re = refusedBy(t, err, gobreaker.ErrOpenState, 0)
		assert.Nil(t, re.Last)
		assert.Equal(t, `retry: circuit open: breaker "payments" is open before the first attempt`, err.Error())
		assert.Zero(t, time.Since(start), "no wait spent while open")
		assert.Equal(t, int64(3), d.calls.Load())

		// Half-open once Timeout has passed (gobreaker: strictly after);
		// the downstream is back, and MaxRequests (2) successes close the
		// breaker.
		time.Sleep(30*time.Second + time.Nanosecond)
		assert.Equal(t, gobreaker.StateHalfOpen, cb.State())
		d.down.Store(false)
		require.NoError(t, r.Do(ctx, d.fn))
		assert.Equal(t, gobreaker.StateHalfOpen, cb.State(), "one success of MaxRequests 2")
		require.NoError(t, r.Do(ctx, d.fn))
		assert.Equal(t, gobreaker.StateClosed, cb.State())
		assert.Equal(t, int64(5), d.calls.Load())

		// Closed again: failures count from zero.
		d.down.Store(true)
		require.ErrorIs(t, retry.Do(ctx, d.fn, retry.WithOverload(&retry.OverloadOptions{Breaker: b}), retry.WithMaxAttempts(2), retry.WithBackoff(retry.Constant(0))), retry.ErrExhausted)
		assert.Equal(t, gobreaker.StateClosed, cb.State())
		assert.Equal(t, int64(7), d.calls.Load())
	})
}

// TestHalfOpenFailureReopens: the trial attempt of the half-open state
// fails, so the breaker opens again and the call ends at once, without
// the wait before an attempt the breaker would refuse.
func TestHalfOpenFailureReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, cb := newBreaker(t, gobreaker.Settings{
			Name:        "payments",
			Timeout:     10 * time.Second,
			ReadyToTrip: tripAfter(2),
		})
		r := newRetrier(t, b, 3)
		ctx := context.Background()
		var d downstream
		d.down.Store(true)
		refusedBy(t, r.Do(ctx, d.fn), gobreaker.ErrOpenState, 2)
		require.Equal(t, gobreaker.StateOpen, cb.State())

		time.Sleep(10*time.Second + time.Nanosecond)
		require.Equal(t, gobreaker.StateHalfOpen, cb.State())
		start := time.Now()
		re := refusedBy(t, r.Do(ctx, d.fn), gobreaker.ErrOpenState, 1)
		assert.Same(t, errDown, re.Last)
		assert.Equal(t, int64(3), d.calls.Load(), "one trial attempt")
		assert.Equal(t, gobreaker.StateOpen, cb.State())
		assert.Zero(t, time.Since(start), "the breaker opened again: no wait for a refused attempt")
	})
}

// TestHalfOpenAllowsMaxRequests: while MaxRequests trial attempts are
// under way, the next attempt is refused with ErrTooManyRequests.
func TestHalfOpenAllowsMaxRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, cb := newBreaker(t, gobreaker.Settings{
			Name:        "payments",
			MaxRequests: 2,
			Timeout:     10 * time.Second,
			ReadyToTrip: tripAfter(1),
		})
		r := newRetrier(t, b, 1)
		ctx := context.Background()
		require.ErrorIs(t, r.Do(ctx, func(context.Context) error { return errDown }), errDown)
		time.Sleep(10*time.Second + 1)
		require.Equal(t, gobreaker.StateHalfOpen, cb.State())

		release := make(chan struct{})
		var started atomic.Int64
		slow := func(context.Context) error {
			started.Add(1)
			<-release
			return nil
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() { errs[i] = r.Do(ctx, slow) })
		}
		synctest.Wait() // both trial attempts are in fn
		require.Equal(t, int64(2), started.Load())

		err := r.Do(ctx, slow)
		refusedBy(t, err, gobreaker.ErrTooManyRequests, 0)
		assert.Equal(t, `retry: circuit open: breaker "payments" is half-open: too many requests before the first attempt`, err.Error())
		assert.Equal(t, int64(2), started.Load())

		close(release)
		wg.Wait()
		for _, err := range errs {
			assert.NoError(t, err)
		}
		assert.Equal(t, gobreaker.StateClosed, cb.State())
	})
}

// TestNotAFailure: permanent errors, errors WithRetryIf refuses and
// cancellations are not the downstream's failures; gobreaker counts them
// as successes, and they do not trip the breaker.
func TestNotAFailure(t *testing.T) {
	b, cb := newBreaker(t, gobreaker.Settings{
		ReadyToTrip: tripAfter(1),
	})
	errBadRequest := errors.New("400 bad request")
	ctx := context.Background()
	calls := 0
	for range 5 {
		err := retry.Do(ctx, func(context.Context) error { calls++; return retry.Permanent(errBadRequest) }, retry.WithOverload(&retry.OverloadOptions{Breaker: b}))
		require.ErrorIs(t, err, errBadRequest)
	}
	err := retry.Do(ctx, func(context.Context) error { calls++; return errBadRequest }, retry.WithOverload(&retry.OverloadOptions{Breaker: b}),
		retry.WithRetryIf(func(err error) bool { return !errors.Is(err, errBadRequest) }))
	require.ErrorIs(t, err, errBadRequest)
	cctx, cancel := context.WithCancel(ctx)
	err = retry.Do(cctx, func(context.Context) error { calls++; cancel(); return errDown }, retry.WithOverload(&retry.OverloadOptions{Breaker: b}))
	require.ErrorIs(t, err, context.Canceled)

	assert.Equal(t, 7, calls)
	assert.Equal(t, gobreaker.StateClosed, cb.State())
	assert.Equal(t, gobreaker.Counts{Requests: 7, TotalSuccesses: 6, ConsecutiveSuccesses: 6, TotalExclusions: 1}, cb.Counts(),
		"six answers for good; the cancelled attempt is excluded")

	// One error worth retrying is a failure, and trips it.
	err = retry.Do(ctx, func(context.Context) error { calls++; return errDown }, retry.WithOverload(&retry.OverloadOptions{Breaker: b}), retry.WithBackoff(retry.Constant(0)))
	refusedBy(t, err, gobreaker.ErrOpenState, 1)
	assert.Equal(t, 8, calls)
}

// TestConcurrent shares one breaker among 64 goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	const goroutines, callsEach = 64, 10
	ctx := context.Background()

	t.Run("every outcome reported", func(t *testing.T) {
		b, cb := newBreaker(t, gobreaker.Settings{ReadyToTrip: func(gobreaker.Counts) bool { return false }})
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range callsEach {
					n := 0 // each call fails once, then succeeds
					err := retry.Do(ctx, func(context.Context) error {
						if n++; n == 1 {
							return errDown
						}
						return nil
					}, retry.WithOverload(&retry.OverloadOptions{Breaker: b, NoBudget: true}), retry.WithBackoff(retry.Constant(0)))
					assert.NoError(t, err)
				}
			})
		}
		wg.Wait()
		const calls = goroutines * callsEach
		c := cb.Counts()
		assert.Equal(t, uint32(2*calls), c.Requests)
		assert.Equal(t, uint32(calls), c.TotalFailures)
		assert.Equal(t, uint32(calls), c.TotalSuccesses)
	})

	t.Run("trips once", func(t *testing.T) {
		const trip = 5
		b, cb := newBreaker(t, gobreaker.Settings{ReadyToTrip: tripAfter(trip)})
		var d downstream
		d.down.Store(true)
		var attempts, refused atomic.Int64
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range callsEach {
					err := retry.Do(ctx, d.fn, retry.WithOverload(&retry.OverloadOptions{Breaker: b, NoBudget: true}), retry.WithBackoff(retry.Constant(0)))
					var re *retry.Error
					if !assert.ErrorAs(t, err, &re) {
						return
					}
					attempts.Add(int64(re.Attempts))
					switch re.Outcome {
					case retry.OutcomeRefused:
						refused.Add(1)
						assert.ErrorIs(t, err, gobreaker.ErrOpenState)
					case retry.OutcomeExhausted:
						assert.ErrorIs(t, err, errDown)
					default:
						t.Errorf("outcome %v", re.Outcome)
					}
				}
			})
		}
		wg.Wait()
		assert.Equal(t, d.calls.Load(), attempts.Load(), "Attempts counts every call of fn, and only those")
		// Each goroutine has at most one attempt under way: besides the
		// trip failures, at most the 63 others were let through before
		// the breaker opened (gobreaker drops their outcomes).
		assert.LessOrEqual(t, d.calls.Load(), int64(trip+goroutines-1))
		assert.GreaterOrEqual(t, refused.Load(), int64(goroutines*callsEach-(trip+goroutines-1)))
		assert.Equal(t, gobreaker.StateOpen, cb.State())
	})
}

// TestOutageLoad counts the downstream's load during an outage: 200
// calls, one every 300ms of virtual time, for 60s, of up to 3 attempts
// 1s apart, all failing. No two attempts fall on the same instant, so the order of events,
// and every count, is exact.
func TestOutageLoad(t *testing.T) {
	run := func(t *testing.T, b overload.Breaker) (d *downstream, refused, refusedFirst int) {
		t.Helper()
		opts := []retry.Option{retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithMaxAttempts(3),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter)}
		if b != nil {
			opts = append(opts, retry.WithOverload(&retry.OverloadOptions{Breaker: b}))
		}
		r, err := retry.New(opts...)
		require.NoError(t, err)
		d = new(downstream)
		d.down.Store(true)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				err := r.Do(context.Background(), d.fn)
				var re *retry.Error
				if !assert.ErrorAs(t, err, &re) {
					return
				}
				if re.Attempts > 0 {
					assert.ErrorIs(t, err, errDown)
				}
				mu.Lock()
				defer mu.Unlock()
				if re.Outcome == retry.OutcomeRefused {
					refused++
					if re.Attempts == 0 {
						refusedFirst++
					}
				}
			})
			time.Sleep(300 * time.Millisecond)
		}
		wg.Wait()
		return d, refused, refusedFirst
	}

	t.Run("without a breaker", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d, refused, _ := run(t, nil)
			assert.Equal(t, int64(600), d.calls.Load())
			assert.Zero(t, refused)
		})
	})
	t.Run("with a breaker", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			b, cb := newBreaker(t, gobreaker.Settings{Name: "inventory", Timeout: 10 * time.Second})
			d, refused, refusedFirst := run(t, b)
			// 6 failed attempts trip the breaker (at 1.2s, by gobreaker's
			// default of more than 5 consecutive failures); then one trial
			// attempt each time it turns half-open, at 11.4s, 21.6s, 31.8s,
			// 42.0s and 52.2s, each failing and opening it for 10s more.
			assert.Equal(t, int64(11), d.calls.Load())
			assert.Equal(t, 200, refused, "every call ends refused")
			assert.Equal(t, 190, refusedFirst, "190 calls never reached the downstream")

			// After the outage the next trial attempt closes it.
			time.Sleep(80*time.Second - time.Since(start))
			d.down.Store(false)
			require.NoError(t, retry.Do(context.Background(), d.fn, retry.WithOverload(&retry.OverloadOptions{Breaker: b})))
			assert.Equal(t, gobreaker.StateClosed, cb.State())
		})
	})
}

// TestHalfOpenCancelledTrialIsNotCounted: a trial attempt that the caller
// cancels says nothing of the downstream: the breaker stays half-open,
// and the next trial decides.
func TestHalfOpenCancelledTrialIsNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, cb := newBreaker(t, gobreaker.Settings{Name: "payments", Timeout: time.Second, ReadyToTrip: tripAfter(1)})
		ctx := context.Background()
		refusedBy(t, retry.Do(ctx, func(context.Context) error { return errDown }, retry.WithOverload(&retry.OverloadOptions{Breaker: b}), retry.WithBackoff(retry.Constant(0))),
			gobreaker.ErrOpenState, 1)
		time.Sleep(time.Second + time.Nanosecond)
		cctx, cancel := context.WithCancel(ctx)
		err := retry.Do(cctx, func(context.Context) error { cancel(); return context.Canceled }, retry.WithOverload(&retry.OverloadOptions{Breaker: b}))
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, gobreaker.StateHalfOpen, cb.State(), "neither closed nor open again")
		require.NoError(t, retry.Do(ctx, func(context.Context) error { return nil }, retry.WithOverload(&retry.OverloadOptions{Breaker: b})), "the next trial is allowed")
		assert.Equal(t, gobreaker.StateClosed, cb.State())
	})
}

func TestNewBreakerKeepsTheUsersExclusions(t *testing.T) {
	errIgnored := errors.New("ignore me")
	b, err := retrygobreaker.NewBreaker(gobreaker.Settings{ReadyToTrip: tripAfter(1),
		IsExcluded: func(err error) bool { return errors.Is(err, errIgnored) }})
	require.NoError(t, err)
	ctx := context.Background()
	_ = retry.Do(ctx, func(context.Context) error { return errIgnored }, retry.WithOverload(&retry.OverloadOptions{Breaker: b}), retry.WithMaxAttempts(1))
	require.NoError(t, b.Refuses(), "the user's exclusion holds")
	_ = retry.Do(ctx, func(context.Context) error { return errDown }, retry.WithOverload(&retry.OverloadOptions{Breaker: b}), retry.WithMaxAttempts(1))
	require.ErrorIs(t, b.Refuses(), overload.ErrCircuitOpen)
}

// A zero Breaker refuses every attempt, with an error that reads once as
// the Retrier's ("retry: " once) and matches the setup mistake, not an
// open circuit: Stats counts the call as refused, by neither a budget nor
// a breaker.
func TestZeroBreakerRefusesEveryAttempt(t *testing.T) {
	st := new(retrystats.Stats)
	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Breaker: &retrygobreaker.Breaker{}}), retry.WithObserver(st))
	require.NoError(t, err)
	err = r.Do(t.Context(), func(context.Context) error { return nil })
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.NotErrorIs(t, err, overload.ErrCircuitOpen)
	assert.Equal(t, "retry: invalid option: retrygobreaker: the *Breaker is nil or zero, and refuses every attempt; build one with New or NewBreaker before the first attempt", err.Error())
	s := st.Snapshot()
	assert.Equal(t, uint64(1), s.Refused)
	assert.Zero(t, s.CircuitOpen+s.BudgetDenied)
}
