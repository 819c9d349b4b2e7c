package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/retrytest"
)

var (
	errTransient = errors.New("transient")
	errFatal     = errors.New("fatal")
)

// failing returns an fn that fails with err on its first n calls and then
// succeeds, and a pointer to its call count.
func failing(n int, err error) (func(context.Context) error, *atomic.Int64) {
	var calls atomic.Int64
	return func(context.Context) error {
		if calls.Add(1) <= int64(n) {
			return err
		}
		return nil
	}, &calls
}

// recorder is an Observer that keeps every event, for asserting on waits
// and outcomes without reaching into internals.
type recorder struct {
	mu      sync.Mutex
	events  []string // "start", "end", "retry", "waitend", "done", in order
	starts  []int
	ends    []retry.AttemptEnd
	retries []retry.Scheduled
	waits   []retry.WaitEnd
	done    []retry.Done
}

func (r *recorder) OnAttemptStart(_ context.Context, e retry.AttemptStart) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "start")
	r.starts = append(r.starts, e.Attempt)
}

func (r *recorder) OnAttemptEnd(_ context.Context, e retry.AttemptEnd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "end")
	r.ends = append(r.ends, e)
}

func (r *recorder) OnRetry(_ context.Context, e retry.Scheduled) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "retry")
	r.retries = append(r.retries, e)
}

func (r *recorder) OnWaitEnd(_ context.Context, e retry.WaitEnd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "waitend")
	r.waits = append(r.waits, e)
}

func (r *recorder) OnDone(_ context.Context, e retry.Done) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "done")
	r.done = append(r.done, e)
}

// count returns how many events of a kind ("start", "end", "retry",
// "waitend" or "done") were seen.
func (r *recorder) count(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return map[string]int{"start": len(r.starts), "end": len(r.ends), "retry": len(r.retries), "waitend": len(r.waits), "done": len(r.done)}[kind]
}

func (r *recorder) dones() []retry.Done {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]retry.Done(nil), r.done...)
}

func (r *recorder) delays() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ds []time.Duration
	for _, e := range r.retries {
		ds = append(ds, e.Delay)
	}
	return ds
}

func mustNew(t testing.TB, opts ...retry.Option) *retry.Retrier {
	t.Helper()
	r, err := retry.New(opts...)
	require.NoError(t, err)
	return r
}

func TestDo_succeedsAfterTransientFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fn, calls := failing(2, errTransient)
		rec := &recorder{}
		r := mustNew(t, retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter), retry.WithObserver(rec))
		start := time.Now()

		err := r.Do(t.Context(), fn)

		require.NoError(t, err)
		assert.Equal(t, int64(3), calls.Load())
		assert.Equal(t, 2*time.Second, time.Since(start), "two waits of 1s on fake time")
		assert.Equal(t, []time.Duration{time.Second, time.Second}, rec.delays())
		require.Len(t, rec.done, 1)
		assert.Equal(t, retry.OutcomeSuccess, rec.done[0].Outcome)
		assert.Equal(t, 3, rec.done[0].Attempts)
		assert.Equal(t, 2*time.Second, rec.done[0].Elapsed)
	})
}

func TestDoValue_returnsTheSucceedingCallsValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		v, err := retry.DoValue(t.Context(), func(context.Context) (string, error) {
			n++
			if n < 3 {
				return fmt.Sprintf("partial %d", n), errTransient
			}
			return fmt.Sprintf("value %d", n), nil
		})
		require.NoError(t, err)
		assert.Equal(t, "value 3", v)
	})
}

func TestDoValue_failureReturnsZeroValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v, err := retry.DoValue(t.Context(), func(context.Context) (int, error) {
			return 42, errTransient
		}, retry.WithMaxAttempts(2))
		require.ErrorIs(t, err, retry.ErrExhausted)
		assert.Equal(t, 0, v)

		// Ended by the context in the wait after a failed attempt: the
		// failed attempt's value is not returned either.
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		v, err = retry.DoValue(ctx, func(context.Context) (int, error) {
			return 42, errTransient
		}, retry.WithBackoff(retry.Constant(time.Hour)))
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 0, v)
	})
}

func TestDoValueWith_usesThePrebuiltRetrier(t *testing.T) {
	r := mustNew(t, retry.WithMaxAttempts(1))
	calls := 0
	_, err := retry.DoValueOn(t.Context(), r, func(context.Context) (int, error) {
		calls++
		return 0, errTransient
	})
	require.ErrorIs(t, err, retry.ErrExhausted)
	assert.Equal(t, 1, calls)
}

func TestDo_neverReturnsNilWithoutASuccessfulCall(t *testing.T) {
	// Every way Do can end except success must give a non-nil error.
	synctest.Test(t, func(t *testing.T) {
		cancelled, cancel := context.WithCancel(t.Context())
		cancel()
		cases := map[string]func() error{
			"exhausted": func() error {
				return retry.Do(t.Context(), func(context.Context) error { return errTransient }, retry.WithMaxAttempts(2))
			},
			"permanent": func() error {
				return retry.Do(t.Context(), func(context.Context) error { return retry.Permanent(errFatal) })
			},
			"cancelled_before_start": func() error {
				return retry.Do(cancelled, func(context.Context) error { return nil })
			},
			"max_elapsed": func() error {
				return retry.Do(t.Context(), func(context.Context) error { return errTransient },
					retry.WithMaxElapsed(time.Nanosecond), retry.WithMaxAttempts(math.MaxInt))
			},
		}
		for name, do := range cases {
			assert.Error(t, do(), name)
		}
	})
}

func TestDo_permanentErrorStopsAtOnce(t *testing.T) {
	cases := []struct {
		name string
		err  error
	}{
		{"bare", retry.Permanent(errFatal)},
		{"wrapped_twice", fmt.Errorf("ctx: %w", fmt.Errorf("more: %w", retry.Permanent(errFatal)))},
		{"joined", errors.Join(errors.New("other"), retry.Permanent(errFatal))},
		{"retry_after_inside_permanent", retry.Permanent(retry.After(errFatal, time.Second))},
		{"permanent_inside_retry_after", retry.After(retry.Permanent(errFatal), time.Second)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			err := retry.Do(t.Context(), func(context.Context) error {
				calls++
				return tc.err
			}, retry.WithMaxAttempts(5))

			assert.Equal(t, 1, calls)
			require.ErrorIs(t, err, errFatal)
			assert.NotErrorIs(t, err, retry.ErrExhausted)
			var re *retry.Error
			require.ErrorAs(t, err, &re)
			assert.Equal(t, retry.OutcomePermanent, re.Outcome)
			assert.Equal(t, 1, re.Attempts)
			assert.Contains(t, err.Error(), tc.err.Error(), "the original message, prefixes included")
			assert.True(t, retry.IsPermanent(err), "a call that ended for good is permanent to an outer Do too")
		})
	}
}

func TestPermanent_nilAndDetection(t *testing.T) {
	assert.NoError(t, retry.Permanent(nil))
	assert.NoError(t, retry.After(nil, time.Second))
	assert.False(t, retry.IsPermanent(nil))
	assert.False(t, retry.IsPermanent(errFatal))
	assert.True(t, retry.IsPermanent(fmt.Errorf("x: %w", retry.Permanent(errFatal))))
	assert.True(t, retry.IsPermanent(errors.Join(errFatal, retry.Permanent(errTransient))))
	assert.ErrorIs(t, retry.Permanent(errFatal), errFatal)
	assert.Equal(t, errFatal.Error(), retry.Permanent(errFatal).Error())
}

func TestDo_exhaustedKeepsLastErrorAndCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		calls := 0
		start := time.Now()
		err := retry.Do(t.Context(), func(context.Context) error {
			calls++
			return fmt.Errorf("attempt %d: %w", calls, errTransient)
		}, retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter), retry.WithObserver(rec))

		assert.Equal(t, 3, calls)
		require.ErrorIs(t, err, retry.ErrExhausted)
		require.ErrorIs(t, err, errTransient)
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 3, re.Attempts)
		assert.Equal(t, retry.OutcomeExhausted, re.Outcome)
		assert.EqualError(t, re.Last, "attempt 3: transient")
		assert.Equal(t, "retry: attempts exhausted after 3 attempts: attempt 3: transient", err.Error())
		// No wait after the last attempt: two waits for three attempts.
		assert.Len(t, rec.retries, 2)
		assert.Equal(t, 2*time.Second, time.Since(start))
	})
}

func TestDo_cancelDuringWaitReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cause := errors.New("shutting down")
		ctx, cancel := context.WithCancelCause(t.Context())
		calls := 0
		r := mustNew(t, retry.WithBackoff(retry.Constant(time.Hour)), retry.WithMaxAttempts(5))
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			done <- r.Do(ctx, func(context.Context) error {
				calls++
				return errTransient
			})
		}()
		time.Sleep(500 * time.Millisecond) // fake time: Do is parked in its first wait
		synctest.Wait()
		cancel(cause)
		err := <-done

		assert.Equal(t, 500*time.Millisecond, time.Since(start), "returned without waiting further")
		assert.Equal(t, 1, calls)
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, cause)
		assert.ErrorIs(t, err, errTransient)
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, retry.OutcomeCanceled, re.Outcome)
	})
}

func TestDo_doneContextNeverCallsFn(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls := 0
	err := retry.Do(ctx, func(context.Context) error { calls++; return nil })
	assert.Equal(t, 0, calls)
	assert.ErrorIs(t, err, context.Canceled)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 0, re.Attempts)
	assert.NoError(t, re.Last)
	assert.Equal(t, "retry: context canceled before the first attempt", err.Error())
}

func TestDo_contextCancellationErrorsAreNotRetried(t *testing.T) {
	t.Run("own_context_cancelled_during_attempt", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		err := retry.Do(ctx, func(ctx context.Context) error {
			calls++
			cancel()
			return ctx.Err()
		}, retry.WithMaxAttempts(5))
		assert.Equal(t, 1, calls)
		assert.ErrorIs(t, err, context.Canceled)
	})
	t.Run("canceled_from_elsewhere", func(t *testing.T) {
		calls := 0
		err := retry.Do(t.Context(), func(ctx context.Context) error {
			calls++
			return fmt.Errorf("query: %w", context.Canceled)
		}, retry.WithMaxAttempts(5))
		assert.Equal(t, 1, calls)
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, retry.OutcomePermanent, re.Outcome)
	})
	// Errors that match context.Canceled only through their own Is
	// method, as errors.Is sees them: alone, wrapping another error, and
	// inside a join.
	for name, fail := range map[string]error{
		"own_is":          isCanceledError{},
		"own_is_wrapping": isCanceledError{inner: errTransient},
		"joined":          errors.Join(errTransient, fmt.Errorf("db: %w", isCanceledError{})),
	} {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, fail, context.Canceled, "the case is what errors.Is calls cancelled")
			calls := 0
			err := retry.Do(t.Context(), func(context.Context) error { calls++; return fail },
				retry.WithMaxAttempts(5), retry.WithBackoff(retry.Constant(0)))
			assert.Equal(t, 1, calls)
			var re *retry.Error
			require.ErrorAs(t, err, &re)
			assert.Equal(t, retry.OutcomePermanent, re.Outcome)
		})
	}
	t.Run("own_is_not_canceled", func(t *testing.T) {
		calls := 0
		err := retry.Do(t.Context(), func(context.Context) error { calls++; return notCanceledError{} },
			retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)))
		assert.Equal(t, 3, calls, "an Is method that denies context.Canceled leaves the error retried")
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, retry.OutcomeExhausted, re.Outcome)
	})
}

// isCanceledError matches context.Canceled through its own Is method, and
// wraps inner when it is set.
type isCanceledError struct{ inner error }

func (isCanceledError) Error() string        { return "cancelled upstream" }
func (isCanceledError) Is(target error) bool { return target == context.Canceled }
func (e isCanceledError) Unwrap() error      { return e.inner }

// notCanceledError has an Is method that matches nothing.
type notCanceledError struct{}

func (notCanceledError) Error() string { return "busy" }
func (notCanceledError) Is(error) bool { return false }

func TestDo_attemptTimeoutIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		err := retry.Do(t.Context(), func(ctx context.Context) error {
			calls++
			if calls < 3 {
				<-ctx.Done() // hangs until the attempt's own timeout
				return ctx.Err()
			}
			return nil
		}, retry.WithAttemptTimeout(time.Second), retry.WithBackoff(retry.Constant(0)))
		require.NoError(t, err)
		assert.Equal(t, 3, calls)
	})
}

func TestDo_stopsBeforeAWaitThatWouldPassTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		calls := 0
		start := time.Now()
		err := retry.Do(ctx, func(context.Context) error {
			calls++
			return errTransient
		}, retry.WithBackoff(retry.Constant(6*time.Second)), retry.WithJitter(retry.NoJitter), retry.WithMaxAttempts(10))

		// Attempts at 0s and 6s; the next wait would end at 12s > 10s.
		assert.Equal(t, 2, calls)
		assert.Equal(t, 6*time.Second, time.Since(start), "no sleep toward the deadline")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, errTransient)
		assert.NoError(t, ctx.Err(), "returned before the deadline")
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, retry.OutcomeDeadline, re.Outcome)
		assert.Equal(t, 2, re.Attempts)
		assert.Equal(t, "retry: next wait would end past the context deadline after 2 attempts: transient", err.Error())
	})
}

func TestDo_stopsBeforeAWaitThatWouldPassMaxElapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		start := time.Now()
		err := retry.Do(t.Context(), func(context.Context) error {
			calls++
			time.Sleep(time.Second) // each attempt takes 1s of fake time
			return errTransient
		}, retry.WithBackoff(retry.Constant(3*time.Second)), retry.WithJitter(retry.NoJitter),
			retry.WithMaxElapsed(10*time.Second), retry.WithMaxAttempts(math.MaxInt))

		// Attempts run 0-1s, 4-5s, 8-9s; the wait after would end at 12s.
		assert.Equal(t, 3, calls)
		assert.Equal(t, 9*time.Second, time.Since(start))
		assert.ErrorIs(t, err, retry.ErrExhausted)
		assert.ErrorIs(t, err, retry.ErrExhausted)
		assert.ErrorIs(t, err, errTransient)
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, retry.OutcomeMaxElapsed, re.Outcome)
	})
}

func TestDo_stopsBeforeAWaitThatWouldEndExactlyAtTheLimit(t *testing.T) {
	// A wait that ends exactly when the budget or the deadline does would
	// leave no time for the attempt after it.
	for _, tc := range []struct {
		name    string
		opts    []retry.Option
		ctx     func(context.Context) (context.Context, context.CancelFunc)
		outcome retry.Outcome
	}{
		{"budget", []retry.Option{retry.WithMaxElapsed(2 * time.Second)}, nil, retry.OutcomeMaxElapsed},
		{"deadline", nil, func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 2*time.Second)
		}, retry.OutcomeDeadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := t.Context(), context.CancelFunc(func() {})
				if tc.ctx != nil {
					ctx, cancel = tc.ctx(ctx)
				}
				defer cancel()
				calls := 0
				start := time.Now()
				err := retry.Do(ctx, func(context.Context) error { calls++; return errTransient },
					append(tc.opts, retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter),
						retry.WithMaxAttempts(math.MaxInt))...)

				// Attempts at 0s and 1s; the wait after the second would end at 2s.
				assert.Equal(t, 2, calls)
				assert.Equal(t, time.Second, time.Since(start))
				var re *retry.Error
				require.ErrorAs(t, err, &re)
				assert.Equal(t, tc.outcome, re.Outcome)
				assert.NoError(t, ctx.Err(), "Do returned before the deadline")
			})
		})
	}
}

func TestDo_attemptTimeoutRunsOnTheInjectedClock(t *testing.T) {
	mock := clock.NewMock()
	calls := 0
	hung := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- retry.Do(context.Background(), func(ctx context.Context) error {
			calls++
			if calls > 1 {
				return nil
			}
			deadline, ok := ctx.Deadline()
			if !ok || !deadline.Equal(mock.Now().Add(5*time.Second)) {
				return retry.Permanent(fmt.Errorf("attempt deadline %v (set: %v), want 5s after the mock's now", deadline, ok))
			}
			close(hung)
			<-ctx.Done() // until the mock's 5s pass
			return ctx.Err()
		}, retry.WithClock(mock), retry.WithAttemptTimeout(5*time.Second), retry.WithBackoff(retry.Constant(0)))
	}()
	select {
	case <-hung:
		mock.Add(5 * time.Second)
	case err := <-errc:
		require.FailNow(t, "the first attempt did not wait for its timeout", "Do returned %v", err)
	}
	require.NoError(t, <-errc)
	assert.Equal(t, 2, calls, "the timed-out attempt is retried")
}

func TestDo_deadlineOnTheMockClock(t *testing.T) {
	// With a mock clock, deadlines made by the mock are compared with the
	// mock's time, and no real time passes.
	// The waits must fit before the deadline on the mock and not on the
	// real clock: a mock deadline read on the real clock lies decades in
	// the past, which would stop Do after one attempt.
	synctest.Test(t, func(t *testing.T) {
		mock := &advancingClock{Mock: clock.NewMock()} // moves on by each wait once Do has armed it
		ctx, cancel := mock.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		calls := 0
		err := retry.Do(ctx, func(context.Context) error {
			calls++
			return errTransient
		}, retry.WithClock(mock), retry.WithBackoff(retry.Constant(2*time.Second)), retry.WithJitter(retry.NoJitter),
			retry.WithMaxAttempts(10))
		// Attempts at 0, 2 and 4s on the mock; the next wait would end at 6s.
		assert.Equal(t, 3, calls)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, errTransient)
		assert.NoError(t, ctx.Err(), "stopped before the mock deadline")
	})
}

func TestDo_retryAfterReplacesBackoffAndIsCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		calls := 0
		err := retry.Do(t.Context(), func(context.Context) error {
			calls++
			switch calls {
			case 1:
				return retry.After(errTransient, 3*time.Second)
			case 2:
				return retry.After(errTransient, time.Hour)
			case 3:
				return retry.After(errTransient, -time.Second)
			case 4:
				return errTransient
			}
			return nil
		}, retry.WithBackoff(retry.Constant(100*time.Millisecond)), retry.WithJitter(retry.FullJitter),
			retry.WithMaxDelay(time.Minute), retry.WithMaxAttempts(5), retry.WithObserver(rec))
		require.NoError(t, err)
		delays := rec.delays()
		require.Len(t, delays, 4)
		assert.Equal(t, []time.Duration{3 * time.Second, time.Minute, 0}, delays[:3], "hint, capped hint, negative hint")
		assert.Less(t, delays[3], 100*time.Millisecond, "back to the jittered backoff")
	})
}

func TestDo_retryAfterIsRetriedEvenWhenRetryIfRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		err := retry.Do(t.Context(), func(context.Context) error {
			calls++
			if calls == 1 {
				return retry.After(errFatal, time.Second)
			}
			return errFatal
		}, retry.WithRetryIf(func(error) bool { return false }), retry.WithMaxAttempts(5))
		assert.Equal(t, 2, calls)
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, retry.OutcomePermanent, re.Outcome)
	})
}

func TestDo_retryIfClassifies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		err := retry.Do(t.Context(), func(context.Context) error {
			calls++
			if calls < 3 {
				return errTransient
			}
			return errFatal
		}, retry.WithRetryIf(func(err error) bool { return errors.Is(err, errTransient) }), retry.WithMaxAttempts(10))
		assert.Equal(t, 3, calls)
		assert.ErrorIs(t, err, errFatal)
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, retry.OutcomePermanent, re.Outcome)
	})
}

func TestDo_exponentialScheduleWithoutJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		err := retry.Do(t.Context(), func(context.Context) error { return errTransient },
			retry.WithBackoff(retry.Exponential(100*time.Millisecond, 2, time.Second)), retry.WithJitter(retry.NoJitter),
			retry.WithMaxAttempts(8), retry.WithObserver(rec))
		require.ErrorIs(t, err, retry.ErrExhausted)
		ms := time.Millisecond
		assert.Equal(t, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second, time.Second}, rec.delays())
	})
}

// TestDo_constantBackoffWaits: Constant(0) waits 0 whatever the jitter,
// which the Retrier knows when it is built; a server delay still replaces
// the waits, and With may change the backoff after that.
func TestDo_constantBackoffWaits(t *testing.T) {
	zero := mustNew(t, retry.WithBackoff(retry.Constant(0)), retry.WithMaxAttempts(3))
	second := mustNew(t, retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter), retry.WithMaxAttempts(3))
	jittered := func(t *testing.T, waits []time.Duration) {
		for _, d := range waits {
			assert.Less(t, d, time.Second, "FullJitter draws below the constant")
		}
	}
	exactly := func(want ...time.Duration) func(*testing.T, []time.Duration) {
		return func(t *testing.T, waits []time.Duration) { assert.Equal(t, want, waits) }
	}
	cases := []struct {
		name string
		r    *retry.Retrier
		opts []retry.Option
		fail error
		want func(*testing.T, []time.Duration)
	}{
		{"zero", zero, nil, errTransient, exactly(0, 0)},
		{"zero_with_jitter", zero, []retry.Option{retry.WithJitter(retry.EqualJitter)}, errTransient, exactly(0, 0)},
		{"no_jitter", second, nil, errTransient, exactly(time.Second, time.Second)},
		{"capped", second, []retry.Option{retry.WithMaxDelay(300 * time.Millisecond)}, errTransient,
			exactly(300*time.Millisecond, 300*time.Millisecond)},
		{"server_delay", zero, nil, retry.After(errTransient, 5*time.Second), exactly(5*time.Second, 5*time.Second)},
		{"then_exponential", zero, []retry.Option{retry.WithBackoff(retry.Exponential(time.Second, 2, time.Minute)), retry.WithJitter(retry.NoJitter)},
			errTransient, exactly(time.Second, 2*time.Second)},
		{"then_zero", second, []retry.Option{retry.WithBackoff(retry.Constant(0))}, errTransient, exactly(0, 0)},
		{"then_jitter", second, []retry.Option{retry.WithJitter(retry.FullJitter), retry.WithRandom(rand.NewPCG(1, 2))}, errTransient, jittered},
		{"default_jitter", mustNew(t, retry.WithBackoff(retry.Constant(time.Second)), retry.WithRandom(rand.NewPCG(3, 4))), nil, errTransient, jittered},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// The clock's WaitArmed records every wait Do arms, the
				// zero ones too.
				clk := &advancingClock{Mock: clock.NewMock()}
				r, err := tc.r.With(append(tc.opts, retry.WithClock(clk))...)
				require.NoError(t, err)
				err = r.Do(t.Context(), func(context.Context) error { return tc.fail })
				require.ErrorIs(t, err, retry.ErrExhausted)
				require.Len(t, clk.waits, 2)
				tc.want(t, clk.waits)
			})
		})
	}
}

func TestDo_maxDelayCapsJitteredWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		_ = retry.Do(t.Context(), func(context.Context) error { return errTransient },
			retry.WithBackoff(retry.Constant(10*time.Second)), retry.WithJitter(retry.ProportionalJitter(0.5)),
			retry.WithMaxDelay(11*time.Second), retry.WithMaxAttempts(50), retry.WithRandom(rand.NewPCG(1, 2)), retry.WithObserver(rec))
		for _, d := range rec.delays() {
			assert.GreaterOrEqual(t, d, 5*time.Second)
			assert.LessOrEqual(t, d, 11*time.Second)
		}
	})
}

func TestDo_seededScheduleIsReproducible(t *testing.T) {
	schedule := func(seed uint64) []time.Duration {
		rec := &recorder{}
		synctest.Test(t, func(t *testing.T) {
			_ = retry.Do(t.Context(), func(context.Context) error { return errTransient },
				retry.WithRandom(rand.NewPCG(seed, seed)), retry.WithMaxAttempts(10),
				retry.WithBackoff(retry.Exponential(time.Second, 2, time.Minute)), retry.WithObserver(rec))
		})
		return rec.delays()
	}
	a, b, c := schedule(7), schedule(7), schedule(8)
	require.Len(t, a, 9)
	assert.Equal(t, a, b, "same seed, same waits")
	assert.NotEqual(t, a, c, "another seed, other waits")
}

func TestDo_decorrelatedIgnoresJitterAndStaysInBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		_ = retry.Do(t.Context(), func(context.Context) error { return errTransient },
			retry.WithBackoff(retry.Decorrelated(time.Second, 20*time.Second)), retry.WithJitter(retry.FullJitter),
			retry.WithMaxAttempts(30), retry.WithRandom(rand.NewPCG(3, 4)), retry.WithObserver(rec))
		delays := rec.delays()
		require.Len(t, delays, 29)
		prev := time.Second
		for i, d := range delays {
			assert.GreaterOrEqual(t, d, time.Second, "wait %d at least base: full jitter was not applied", i)
			assert.LessOrEqual(t, d, min(3*prev, 20*time.Second), "wait %d", i)
			prev = d
		}
		// Without the previous wait every draw would stay in [base, 3*base]:
		// the bounds above would still hold, so check that the waits grow.
		assert.Contains(t, delays, 20*time.Second, "the waits grow from the previous one up to max")
	})
}

func TestNew_rejectsBadInputWithoutCallingFn(t *testing.T) {
	cases := []struct {
		name string
		opt  retry.Option
		want string
	}{
		{"zero_attempts", retry.WithMaxAttempts(0), "WithMaxAttempts(0): attempts must be at least 1 (math.MaxInt for no limit)"},
		{"negative_attempts", retry.WithMaxAttempts(-3), "WithMaxAttempts(-3)"},
		{"nil_backoff", retry.WithBackoff(nil), "WithBackoff(nil)"},
		{"negative_constant", retry.WithBackoff(retry.Constant(-time.Second)), "Constant(-1s): the delay must not be negative"},
		{"negative_linear", retry.WithBackoff(retry.Linear(-1, 0, 0)), "durations must not be negative"},
		{"linear_max_below_initial", retry.WithBackoff(retry.Linear(2*time.Second, 0, time.Second)), "max is less than initial"},
		{"multiplier_below_one", retry.WithBackoff(retry.Exponential(time.Second, 0.5, time.Minute)), "multiplier must be a finite number of at least 1"},
		{"multiplier_nan", retry.WithBackoff(retry.Exponential(time.Second, nanFloat(), time.Minute)), "Exponential(1s, NaN, 1m0s)"},
		{"multiplier_inf", retry.WithBackoff(retry.Exponential(time.Second, infFloat(), time.Minute)), "multiplier must be"},
		{"negative_initial", retry.WithBackoff(retry.Exponential(-time.Second, 2, time.Minute)), "durations must not be negative"},
		{"exponential_max_below_initial", retry.WithBackoff(retry.Exponential(time.Minute, 2, time.Second)), "max is less than initial"},
		{"decorrelated_zero_base", retry.WithBackoff(retry.Decorrelated(0, time.Second)), "base must be positive"},
		{"decorrelated_max_below_base", retry.WithBackoff(retry.Decorrelated(time.Minute, time.Second)), "max is less than base"},
		{"jitter_factor_too_big", retry.WithJitter(retry.ProportionalJitter(1.5)), "ProportionalJitter(1.5): factor must be in [0, 1]"},
		{"jitter_factor_nan", retry.WithJitter(retry.ProportionalJitter(nanFloat())), "ProportionalJitter(NaN)"},
		{"negative_max_delay", retry.WithMaxDelay(-time.Second), "WithMaxDelay(-1s)"},
		{"zero_max_delay", retry.WithMaxDelay(0), "WithMaxDelay(0): a zero cap would remove every wait; for no waits use WithBackoff(Constant(0))"},
		{"negative_max_elapsed", retry.WithMaxElapsed(-time.Second), "WithMaxElapsed(-1s)"},
		{"negative_attempt_timeout", retry.WithAttemptTimeout(-time.Second), "WithAttemptTimeout(-1s)"},
		{"nil_clock", retry.WithClock(nil), "WithClock(nil)"},
		{"nil_retry_if", retry.WithRetryIf(nil), "WithRetryIf(nil)"},
		{"nil_random", retry.WithRandom(nil), "WithRandom(nil)"},
		{"nil_observer", retry.WithObserver(nil), "WithObserver(nil)"},
		{"zero_option", retry.Option{}, "option 0 is the zero Option"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := retry.New(tc.opt)
			assert.Nil(t, r)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.Contains(t, err.Error(), tc.want)

			calls := 0
			err = retry.Do(t.Context(), func(context.Context) error { calls++; return nil }, tc.opt)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			_, err = retry.DoValue(t.Context(), func(context.Context) (int, error) { calls++; return 1, nil }, tc.opt)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.Equal(t, 0, calls, "fn must not be called")
		})
	}
}

// TestNew_reportsTheFirstBadOption: backoffs and jitters are checked when
// applied, like the other options, and the first bad one is reported.
func TestNew_reportsTheFirstBadOption(t *testing.T) {
	_, err := retry.New(retry.WithBackoff(retry.Constant(-time.Second)), retry.WithMaxAttempts(0), retry.WithJitter(retry.ProportionalJitter(99)))
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.Contains(t, err.Error(), "Constant(-1s)")
	_, err = retry.New(retry.WithMaxAttempts(0), retry.WithBackoff(nil))
	assert.Contains(t, err.Error(), "WithMaxAttempts(0)")
	_, err = retry.New(retry.WithJitter(retry.ProportionalJitter(99)), retry.WithBackoff(nil))
	assert.Contains(t, err.Error(), "ProportionalJitter(99): factor must be in [0, 1]")
}

func TestDo_rejectsNilFnAndContext(t *testing.T) {
	//nolint:staticcheck // a nil context is the bad input under test
	cases := map[string]error{
		"nil_fn":               retry.Do(t.Context(), nil),
		"nil_value_fn":         func() error { _, err := retry.DoValue[int](t.Context(), nil); return err }(),
		"nil_retrier_nil_fn":   (*retry.Retrier)(nil).Do(t.Context(), nil),
		"nil_context":          retry.Do(nilContext(), func(context.Context) error { return nil }),
		"with_invalid_options": func() error { _, err := mustNew(t).With(retry.WithMaxAttempts(0)); return err }(),
	}
	for name, err := range cases {
		assert.ErrorIs(t, err, retry.ErrInvalidOption, name)
	}
}

// A nil *Retrier is the zero Retrier wherever one is taken, as its Name
// and Wait always were: its calls run with the zero Retrier's policy
// (New's, with no budget), and With builds on it.
func TestDo_nilRetrierIsTheZeroRetrier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var nilRetrier *retry.Retrier
		fn, calls := failing(2, errTransient)
		require.NoError(t, nilRetrier.Do(t.Context(), fn))
		assert.EqualValues(t, 3, calls.Load(), "the zero Retrier's 3 attempts")
		fn, calls = failing(5, errTransient)
		var e *retry.Error
		require.ErrorAs(t, nilRetrier.Do(t.Context(), fn), &e)
		assert.Equal(t, 3, e.Attempts)
		v, err := retry.DoValueOn(t.Context(), nilRetrier, okValue)
		require.NoError(t, err)
		assert.Equal(t, 1, v)
		named, err := nilRetrier.With(retry.WithName("charge"))
		require.NoError(t, err)
		assert.Equal(t, "charge", named.Name())
		assert.False(t, nilRetrier.Hedges())
	})
}

func TestRetrier_zeroValueUsesDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r retry.Retrier
		fn, calls := failing(100, errTransient)
		err := r.Do(t.Context(), fn)
		require.ErrorIs(t, err, retry.ErrExhausted)
		assert.Equal(t, int64(3), calls.Load())
	})
}

func TestRetrier_withAddsOptionsAndLeavesTheOriginal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := mustNew(t, retry.WithMaxAttempts(2))
		named, err := base.With(retry.WithMaxAttempts(4))
		require.NoError(t, err)

		fn, calls := failing(100, errTransient)
		_ = named.Do(t.Context(), fn)
		assert.Equal(t, int64(4), calls.Load())
		fn, calls = failing(100, errTransient)
		_ = base.Do(t.Context(), fn)
		assert.Equal(t, int64(2), calls.Load())
	})
}

func TestRetrier_isReusableAndSafeForConcurrentUse(t *testing.T) {
	// A shared Retrier must give every call the full policy: the bug of
	// stateful backoffs is that a second call gets fewer attempts. (A
	// budget shares state on purpose; it has tests of its own.)
	synctest.Test(t, func(t *testing.T) {
		r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithMaxAttempts(4), retry.WithBackoff(retry.Exponential(time.Millisecond, 2, time.Second)),
			retry.WithRandom(rand.NewPCG(1, 1)))
		var wg sync.WaitGroup
		counts := make([]atomic.Int64, 50)
		for i := range counts {
			wg.Go(func() {
				_ = r.Do(t.Context(), func(context.Context) error { counts[i].Add(1); return errTransient })
			})
		}
		wg.Wait()
		for i := range counts {
			assert.Equal(t, int64(4), counts[i].Load(), "call %d", i)
		}
	})
}

func TestDo_observerSeesEveryEventInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, rec2 := &recorder{}, &recorder{}
		fn, _ := failing(1, errTransient)
		err := retry.Do(t.Context(), fn, retry.WithName("charge"), retry.WithObserver(rec), retry.WithObserver(rec2),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter))
		require.NoError(t, err)
		for _, r := range []*recorder{rec, rec2} {
			// The per-kind lists below do not show the order across kinds.
			assert.Equal(t, []string{"start", "end", "retry", "waitend", "start", "end", "done"}, r.events)
			assert.Equal(t, []int{1, 2}, r.starts)
			require.Len(t, r.ends, 2)
			assert.ErrorIs(t, r.ends[0].Err, errTransient)
			assert.NoError(t, r.ends[1].Err)
			require.Len(t, r.retries, 1)
			assert.Equal(t, retry.Scheduled{Name: "charge", Attempt: 1, Delay: time.Second, Err: errTransient}, r.retries[0])
			assert.Equal(t, []retry.WaitEnd{{Name: "charge", Attempt: 1, Delay: time.Second}}, r.waits)
			require.Len(t, r.done, 1)
			assert.Equal(t, retry.Done{Name: "charge", Outcome: retry.OutcomeSuccess, Attempts: 2, Elapsed: time.Second}, r.done[0])
		}
	})
}

func TestDo_observerDoneWhenCancelledDuringWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		go func() { time.Sleep(time.Second); cancel() }()
		err := retry.Do(ctx, func(context.Context) error { return errTransient },
			retry.WithObserver(rec), retry.WithBackoff(retry.Constant(time.Minute)))
		require.ErrorIs(t, err, context.Canceled)
		// The jittered wait may end before the cancellation: then the
		// next one is cut.
		n := len(rec.retries)
		require.NotZero(t, n)
		require.Len(t, rec.waits, n, "a WaitEnd for every wait OnRetry announced")
		for i, w := range rec.waits {
			assert.Equal(t, retry.WaitEnd{Attempt: i + 1, Delay: rec.retries[i].Delay, Cut: i == n-1}, w,
				"wait %d, cut only by the cancellation", i+1)
		}
		assert.Equal(t, []string{"retry", "waitend", "done"}, rec.events[len(rec.events)-3:])
		require.Len(t, rec.done, 1)
		assert.Equal(t, retry.OutcomeCanceled, rec.done[0].Outcome)
		assert.Equal(t, err, rec.done[0].Err)
	})
}

// countingClock counts the timers a call asks for.
type countingClock struct {
	*clock.Mock
	timers atomic.Int64
}

func (c *countingClock) Timer(d time.Duration) *clock.Timer {
	c.timers.Add(1)
	return c.Mock.Timer(d)
}

// armedCountingClock is a retrytest.Clock, which reports each wait Do
// arms on Armed, that counts the timers a call asks for.
type armedCountingClock struct {
	*retrytest.Clock
	timers atomic.Int64
}

func (c *armedCountingClock) Timer(d time.Duration) *clock.Timer {
	c.timers.Add(1)
	return c.Clock.Timer(d)
}

func TestDo_usesOneTimerPerCallAndNoneForZeroWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := &armedCountingClock{Clock: retrytest.NewClock()}
		r := mustNew(t, retry.WithClock(clk), retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter),
			retry.WithMaxAttempts(5))
		done := make(chan error, 1)
		synctest.Wait() // goroutines that are on their way out have left
		before := bubbleGoroutines(t)
		go func() { done <- r.Do(t.Context(), func(context.Context) error { return errTransient }) }()
		for range 4 {
			d := <-clk.Armed()
			// Counted in this test's bubble only, once Do is parked
			// (a goroutine still running when the stacks are taken may
			// not show in them): other tests' goroutines come and go
			// meanwhile.
			synctest.Wait()
			assert.Equal(t, before+1, bubbleGoroutines(t), "Do starts no goroutine of its own")
			clk.Add(d)
		}
		require.ErrorIs(t, <-done, retry.ErrExhausted)
		assert.Equal(t, int64(1), clk.timers.Load(), "one timer, reset for every wait")

		zero := &countingClock{Mock: clock.NewMock()}
		fn, calls := failing(3, errTransient)
		err := retry.Do(t.Context(), fn, retry.WithClock(zero), retry.WithBackoff(retry.Constant(0)), retry.WithMaxAttempts(5))
		require.NoError(t, err)
		assert.Equal(t, int64(4), calls.Load())
		assert.Equal(t, int64(0), zero.timers.Load(), "zero waits take no timer")
	})
}

func TestDo_mockClockRecipe(t *testing.T) {
	// The recipe from the package docs, run without synctest: WaitArmed
	// says when Do is parked, so mock.Add never races the timer.
	clk := retrytest.NewClock()
	r := mustNew(t, retry.WithClock(clk), retry.WithBackoff(retry.Exponential(time.Second, 2, time.Minute)),
		retry.WithJitter(retry.NoJitter), retry.WithMaxAttempts(4))
	done := make(chan error, 1)
	fn, calls := failing(3, errTransient)
	go func() { done <- r.Do(t.Context(), fn) }()
	var waits []time.Duration
	for range 3 {
		d := <-clk.Armed()
		waits = append(waits, d)
		clk.Add(d)
	}
	require.NoError(t, <-done)
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, waits)
	assert.Equal(t, int64(4), calls.Load())
}

func TestDo_parkedCallsAllReturnOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		// No budget: it would refuse most of these waits (a test of its own).
		r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithBackoff(retry.Constant(time.Hour)), retry.WithMaxAttempts(2))
		const n = 1000
		errs := make(chan error, n)
		for range n {
			go func() { errs <- r.Do(ctx, func(context.Context) error { return errTransient }) }()
		}
		synctest.Wait() // all parked in their wait
		start := time.Now()
		cancel()
		for range n {
			assert.ErrorIs(t, <-errs, context.Canceled)
		}
		assert.Equal(t, time.Duration(0), time.Since(start))
	})
}

func okValue(context.Context) (int, error) { return 1, nil }

// nilContext hides a nil context from vet.
func nilContext() context.Context { return nil }

func TestError_isComplete_whenReturned(t *testing.T) {
	// The error must not reach back into the call's context later: users
	// run Do inside a synctest bubble and inspect the error outside it.
	// Once a call has waited on ctx.Done() in the bubble, the context's
	// done channel belongs to the bubble, and ctx.Err or context.Cause
	// from outside is a fatal error ("receive on synctest channel from
	// outside bubble"), which is why Do reads the cause before returning.
	cause := errors.New("shutting down")
	var before, parked error
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		cancel(cause)
		before = retry.Do(ctx, func(context.Context) error { return nil })

		ctx, cancel = context.WithCancelCause(t.Context())
		time.AfterFunc(time.Second, func() { cancel(cause) })
		parked = retry.Do(ctx, func(context.Context) error { return errTransient },
			retry.WithBackoff(retry.Constant(time.Hour)))
	})
	assert.ErrorIs(t, before, cause)
	assert.ErrorIs(t, before, context.Canceled)
	assert.Equal(t, "retry: shutting down before the first attempt", before.Error())

	assert.ErrorIs(t, parked, cause)
	assert.ErrorIs(t, parked, context.Canceled)
	assert.ErrorIs(t, parked, errTransient)
	assert.Equal(t, "retry: shutting down after 1 attempt: transient", parked.Error())
}

// bubbleGoroutines counts the goroutines of the caller's synctest bubble,
// from the headers of runtime.Stack ("goroutine 8 [..., synctest bubble
// 1]:"), so that other tests' goroutines do not count.
func bubbleGoroutines(t *testing.T) int {
	t.Helper()
	own := make([]byte, 512)
	own = own[:runtime.Stack(own, false)]
	header, _, _ := strings.Cut(string(own), "\n")
	_, bubble, ok := strings.Cut(header, "synctest bubble ")
	require.True(t, ok, "not in a synctest bubble: %s", header)
	id, _, _ := strings.Cut(bubble, "]")
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "synctest bubble "+id+"]")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A call whose context ends while it waits keeps both the context's error
// and its cause, whatever combination the standard contexts make of them,
// and its outcome follows the context's error (unknown when the context
// ends during an attempt: fn may have acted).
func TestDo_contextEndsInAWaitWithEveryKindOfCause(t *testing.T) {
	custom := errors.New("shutting down")
	for name, tc := range map[string]struct {
		end       func(parent context.Context) (context.Context, func())
		outcome   retry.Outcome
		is        []error
		inAttempt bool // the context ends during the attempt (a deadline never ends a wait: Do stops before it)
	}{
		"cancel": {func(p context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancel(p)
			time.AfterFunc(time.Second, cancel)
			return ctx, cancel
		}, retry.OutcomeCanceled, []error{context.Canceled}, false},
		"cancel with a cause": {func(p context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(p)
			time.AfterFunc(time.Second, func() { cancel(custom) })
			return ctx, func() { cancel(nil) }
		}, retry.OutcomeCanceled, []error{context.Canceled, custom}, false},
		"cancel with DeadlineExceeded as the cause": {func(p context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(p)
			time.AfterFunc(time.Second, func() { cancel(context.DeadlineExceeded) })
			return ctx, func() { cancel(nil) }
		}, retry.OutcomeCanceled, []error{context.Canceled, context.DeadlineExceeded}, false},
		"deadline with Canceled as the cause": {func(p context.Context) (context.Context, func()) {
			return context.WithDeadlineCause(p, time.Now().Add(time.Second), context.Canceled)
		}, retry.OutcomeUnknown, []error{context.DeadlineExceeded, context.Canceled, retry.ErrOutcomeUnknown}, true},
		"cancel under a deadline": {func(p context.Context) (context.Context, func()) {
			d, stop := context.WithTimeout(p, time.Hour)
			ctx, cancel := context.WithCancel(d)
			time.AfterFunc(time.Second, cancel)
			return ctx, func() { cancel(); stop() }
		}, retry.OutcomeCanceled, []error{context.Canceled}, false},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, stop := tc.end(t.Context())
				defer stop()
				// A wait of 30 minutes: the deadline of an hour does not stop it early.
				r := mustNew(t, retry.WithBackoff(retry.Constant(30*time.Minute)), retry.WithJitter(retry.NoJitter))
				fn := failOnce
				if tc.inAttempt {
					fn = func(ctx context.Context) error { <-ctx.Done(); return errTransient }
				}
				err := r.Do(ctx, fn)
				var re *retry.Error
				require.ErrorAs(t, err, &re)
				assert.Equal(t, tc.outcome, re.Outcome)
				for _, target := range tc.is {
					assert.ErrorIs(t, err, target)
				}
				assert.ErrorIs(t, err, errTransient)
			})
		})
	}
}

func TestDo_callsTheClocksWaitArmedForZeroWaitsWithoutATimer(t *testing.T) {
	// synctest turns a WaitArmed that is never called into a reported
	// deadlock instead of a hung test.
	synctest.Test(t, func(t *testing.T) {
		clk := &armedCountingClock{Clock: retrytest.NewClock()}
		r := mustNew(t, retry.WithClock(clk), retry.WithBackoff(retry.Constant(0)), retry.WithMaxAttempts(4))
		fn, calls := failing(3, errTransient)
		done := make(chan error, 1)
		go func() { done <- r.Do(t.Context(), fn) }()
		var waits []time.Duration
		for range 3 {
			waits = append(waits, <-clk.Armed())
		}
		require.NoError(t, <-done)
		assert.Equal(t, []time.Duration{0, 0, 0}, waits, "one call per wait, with d = 0")
		assert.Equal(t, int64(4), calls.Load())
		assert.Zero(t, clk.timers.Load(), "a zero wait arms no timer")
	})
}

// TestReadmeMockClockRecipe runs the recipe of docs/testing.md (once in
// the README) as written, for
// schedules with non-zero, zero and mixed waits.
func TestReadmeMockClockRecipe(t *testing.T) {
	schedules := map[string][]retry.Option{
		"default":   nil,
		"constant0": {retry.WithBackoff(retry.Constant(0))},
		"mixed": {retry.WithBackoff(retry.BackoffFunc(func(attempt int) time.Duration {
			return time.Duration(attempt-1) * time.Second // 0, then 1s
		}))},
	}
	for name, extra := range schedules {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				fn, calls := failing(2, errTransient)

				// The recipe, from docs/testing.md "Testing your retrying code".
				clk := retrytest.NewClock()
				r, _ := retry.New(append([]retry.Option{retry.WithClock(clk)}, extra...)...)
				done := make(chan error, 1)
				go func() { done <- r.Do(ctx, fn) }()
				for range 2 {
					clk.Add(<-clk.Armed()) // Do is parked on the mock's timer now
				}
				err := <-done

				require.NoError(t, err)
				assert.Equal(t, int64(3), calls.Load())
			})
		})
	}
}

// TestDo_packageLevelOptionsActFromTheFirstAttempt: the package-level Do
// calls fn before it builds its policy only when no option acts on the
// first attempt; every option that does still acts on it.
func TestDo_packageLevelOptionsActFromTheFirstAttempt(t *testing.T) {
	t.Run("observer", func(t *testing.T) {
		rec := &recorder{}
		require.NoError(t, retry.Do(t.Context(), func(context.Context) error { return nil }, retry.WithObserver(rec)))
		assert.Equal(t, []string{"start", "end", "done"}, rec.events)
	})
	t.Run("attempt_timeout", func(t *testing.T) {
		hasDeadline := false
		require.NoError(t, retry.Do(t.Context(), func(ctx context.Context) error {
			_, hasDeadline = ctx.Deadline()
			return nil
		}, retry.WithAttemptTimeout(time.Minute)))
		assert.True(t, hasDeadline, "the first attempt has its own context")
	})
	t.Run("max_elapsed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			calls := 0
			err := retry.Do(t.Context(), func(context.Context) error {
				calls++
				time.Sleep(2 * time.Second)
				return errTransient
			}, retry.WithMaxElapsed(3*time.Second), retry.WithBackoff(retry.Constant(2*time.Second)),
				retry.WithJitter(retry.NoJitter), retry.WithMaxAttempts(5))
			var re *retry.Error
			require.ErrorAs(t, err, &re)
			assert.Equal(t, retry.OutcomeMaxElapsed, re.Outcome, "the budget counts the first attempt's 2s")
			assert.Equal(t, 1, calls)
		})
	})
	t.Run("idempotency", func(t *testing.T) {
		store := memstore.New(nil)
		ctx := retry.ContextWithIdempotencyKey(t.Context(), "order-1")
		calls := 0
		fn := func(context.Context) error { calls++; return nil }
		require.NoError(t, retry.Do(ctx, fn, retry.WithIdempotency(store, nil)))
		require.NoError(t, retry.Do(ctx, fn, retry.WithIdempotency(store, nil)))
		assert.Equal(t, 1, calls, "the second call replays the first one's success")
	})
	t.Run("dead_letter", func(t *testing.T) {
		sink := deadletter.NewMemorySink()
		err := retry.Do(t.Context(), func(context.Context) error { return errTransient },
			retry.WithDeadLetter(sink, nil), retry.WithMaxAttempts(1))
		require.ErrorIs(t, err, errTransient)
		assert.Equal(t, 1, sink.Len())
	})
	t.Run("bad_option_after_good_ones", func(t *testing.T) {
		calls := 0
		err := retry.Do(t.Context(), func(context.Context) error { calls++; return nil },
			retry.WithMaxAttempts(2), retry.WithBackoff(retry.Constant(0)), retry.WithJitter(retry.ProportionalJitter(99)))
		require.ErrorIs(t, err, retry.ErrInvalidOption)
		assert.Zero(t, calls)
	})
}

// TestDo_packageLevelOptionsActOnRetries: the options that the first
// attempt does not need, which the package-level Do applies only after it
// failed, shape the retries as they do on a Retrier.
func TestDo_packageLevelOptionsActOnRetries(t *testing.T) {
	t.Run("schedule", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clk := &advancingClock{Mock: clock.NewMock()}
			fn, calls := failing(5, errTransient)
			err := retry.Do(t.Context(), fn, retry.WithClock(clk), retry.WithMaxAttempts(3),
				retry.WithBackoff(retry.Linear(time.Second, time.Second, time.Minute)), retry.WithJitter(retry.NoJitter),
				retry.WithMaxDelay(1500*time.Millisecond), retry.WithName("op"))
			require.ErrorIs(t, err, retry.ErrExhausted)
			assert.Equal(t, int64(3), calls.Load())
			assert.Equal(t, []time.Duration{time.Second, 1500 * time.Millisecond}, clk.waits, "Linear, capped, on the given clock")
		})
	})
	t.Run("retry_if", func(t *testing.T) {
		fn, calls := failing(5, errFatal)
		err := retry.Do(t.Context(), fn, retry.WithBackoff(retry.Constant(0)),
			retry.WithRetryIf(func(err error) bool { return err != errFatal }))
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, retry.OutcomePermanent, re.Outcome)
		assert.Equal(t, int64(1), calls.Load())
	})
}

// advancingClock is a mock clock that records every wait Do arms and
// moves its time on by the wait at once.
type advancingClock struct {
	*clock.Mock
	waits []time.Duration
}

func (c *advancingClock) WaitArmed(d time.Duration) {
	c.waits = append(c.waits, d)
	c.Add(d)
}
