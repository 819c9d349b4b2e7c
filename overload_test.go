package retry_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrystats"
)

// countingBudget records how Do uses a budget, and refuses retries once
// allow is spent.
type countingBudget struct {
	mu                           sync.Mutex
	allow                        int
	attempted, failed, throttled int
	retries, waited              int
	firsts                       int
}

func (b *countingBudget) Attempted(attempt int, failed, throttled bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.attempted++
	if attempt == 1 {
		b.firsts++
	}
	if failed {
		b.failed++
	}
	if throttled {
		b.throttled++
	}
}

func (b *countingBudget) Retry(time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.retries++
	if b.allow <= 0 {
		return errors.New("test budget: spent")
	}
	b.allow--
	return nil
}

func (b *countingBudget) Waited() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waited++
}

func TestBudget_deniedRetryStopsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 2})
		require.NoError(t, err)
		stats := new(retrystats.Stats)
		r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Budget: b}), retry.WithMaxAttempts(5), retry.WithBackoff(retry.Constant(time.Second)),
			retry.WithObserver(stats))
		var calls int
		start := time.Now()
		err = r.Do(t.Context(), func(context.Context) error { calls++; return errTransient })
		// 2 tokens: the first failure leaves 1, not above half: no retry.
		assert.Equal(t, 1, calls, "the first attempt is never denied; the retry is")
		assert.Zero(t, time.Since(start), "no wait spent")
		require.ErrorIs(t, err, overload.ErrBudgetExhausted)
		require.ErrorIs(t, err, errTransient, "the last attempt's error")
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, retry.OutcomeRefused, re.Outcome)
		assert.Equal(t, 1, re.Attempts)
		assert.Equal(t, "retry: retry budget exhausted: the token bucket is at or below half full after 1 attempt: transient", err.Error())
		assert.False(t, retry.IsPermanent(err))

		// An empty budget still lets every call make its first attempt.
		calls = 0
		for range 10 {
			_ = r.Do(t.Context(), func(context.Context) error { calls++; return errTransient })
		}
		assert.Equal(t, 10, calls)
		s := stats.Snapshot()
		assert.Equal(t, uint64(11), s.Refused)
		assert.Equal(t, uint64(11), s.BudgetDenied)
		assert.Zero(t, s.Retries)
	})
}

func TestBudget_serverDelayDoesNotBypassIt(t *testing.T) {
	b := &countingBudget{}
	r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Budget: b}))
	var calls int
	err := r.Do(t.Context(), func(context.Context) error { calls++; return retry.After(errTransient, time.Hour) })
	assert.Equal(t, 1, calls)
	require.Error(t, err)
	assert.Equal(t, 1, b.retries)
	assert.Equal(t, 1, b.throttled, "a server's delay is a throttling failure")
}

// TestBudget_hearsSuccessesAndFailures: Do tells the budget of every
// success and every failure worth retrying, and of nothing else.
func TestBudget_hearsSuccessesAndFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &countingBudget{allow: 10}
		r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Budget: b}), retry.WithMaxAttempts(4), retry.WithBackoff(retry.Constant(time.Second)))
		fn, calls := failing(2, errTransient)
		require.NoError(t, r.Do(t.Context(), fn))
		assert.Equal(t, int64(3), calls.Load())
		assert.Equal(t, 3, b.attempted)
		assert.Equal(t, 1, b.firsts)
		assert.Equal(t, 2, b.failed)
		assert.Equal(t, 2, b.retries)
		assert.Equal(t, 2, b.waited, "every wait it allowed is given back")

		// A permanent error is an answer, not a failure of the downstream,
		// nor a success: the budget hears nothing of it (gRFC A6).
		*b = countingBudget{allow: 10}
		_ = r.Do(t.Context(), func(context.Context) error { return retry.Permanent(errTransient) })
		assert.Zero(t, b.attempted)
		assert.Zero(t, b.failed)
		assert.Zero(t, b.retries)

		// A first-try success costs one report and no retry.
		*b = countingBudget{}
		require.NoError(t, r.Do(t.Context(), succeed))
		assert.Equal(t, []int{1, 1, 0, 0, 0}, []int{b.attempted, b.firsts, b.failed, b.retries, b.waited})
	})
}

func TestBudget_waitCutShortIsGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &countingBudget{allow: 1}
		r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Budget: b}), retry.WithBackoff(retry.Constant(time.Hour)))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- r.Do(ctx, failOnce) }()
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		assert.Equal(t, 1, b.waited)
	})
}

func TestNew_defaultBudgetKeepsAnOutageNearItsLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := mustNew(t, retry.WithBackoff(retry.Constant(time.Millisecond)))
		var calls atomic.Int64
		for range 200 {
			_ = r.Do(t.Context(), func(context.Context) error { calls.Add(1); return errTransient })
		}
		// Without a budget: 600 (3 attempts each). The default ratio
		// budget allows its reserve (2 a second over its 10 s window: 20)
		// and 10 % of the 200 calls: 20.
		assert.Equal(t, int64(200+40), calls.Load())

		noBudget := mustNew(t, retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithBackoff(retry.Constant(time.Millisecond)))
		calls.Store(0)
		for range 200 {
			_ = noBudget.Do(t.Context(), func(context.Context) error { calls.Add(1); return errTransient })
		}
		assert.Equal(t, int64(600), calls.Load())

		// Retrier.With shares the parent's budget, the same downstream's:
		// its 10 calls get the retry their own calls earn (10 %), where a
		// Retrier of its own would make 30 attempts.
		child, err := r.With(retry.WithName("child"))
		require.NoError(t, err)
		calls.Store(0)
		for range 10 {
			_ = child.Do(t.Context(), func(context.Context) error { calls.Add(1); return errTransient })
		}
		assert.Equal(t, int64(11), calls.Load())
	})
}

func TestWithOverload_refusesWhatItCannotUse(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    *retry.OverloadOptions
		want string
	}{
		{"typed_nil_budget", &retry.OverloadOptions{Budget: (*overload.TokenBucket)(nil)}, "WithOverload: Budget is (*overload.TokenBucket)(nil)"},
		{"typed_nil_breaker", &retry.OverloadOptions{Breaker: (*fakeBreaker)(nil)}, "WithOverload: Breaker is (*retry_test.fakeBreaker)(nil)"},
		{"budget_and_no_budget", &retry.OverloadOptions{Budget: &overload.Ratio{}, NoBudget: true}, "WithOverload: both Budget and NoBudget are set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := retry.New(retry.WithOverload(tc.o))
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestWithOverload_zeroFieldsLeaveTheirSettings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		noRetries, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 2})
		require.NoError(t, err)
		r := mustNew(t, retry.WithBackoff(retry.Constant(0)), retry.WithMaxAttempts(5),
			retry.WithOverload(&retry.OverloadOptions{Budget: noRetries}),
			retry.WithOverload(&retry.OverloadOptions{NestedRetries: true}), retry.WithOverload(nil))
		calls := 0
		for range 3 {
			_ = r.Do(t.Context(), func(context.Context) error { calls++; return errTransient })
		}
		assert.Less(t, calls, 15, "the budget set first still refuses retries")

		r2, err := r.With(retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		require.NoError(t, err)
		calls = 0
		_ = r2.Do(t.Context(), func(context.Context) error { calls++; return errTransient })
		assert.Equal(t, 5, calls, "NoBudget removes it")
	})
}

func TestBudget_maxWaitingRefusesFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 1000, MaxWaiting: 10})
		require.NoError(t, err)
		r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Budget: b}), retry.WithBackoff(retry.Constant(time.Minute)), retry.WithMaxAttempts(2))
		var wg sync.WaitGroup
		var refused, ok atomic.Int64
		for range 100 {
			wg.Go(func() {
				fn, _ := failing(1, errTransient)
				err := r.Do(t.Context(), fn)
				if errors.Is(err, overload.ErrBudgetExhausted) {
					assert.Contains(t, err.Error(), "10 calls are already waiting")
					refused.Add(1)
					return
				}
				if err == nil {
					ok.Add(1)
				}
			})
		}
		synctest.Wait()
		assert.Equal(t, int64(90), refused.Load(), "refused without parking")
		time.Sleep(time.Minute) // virtual: the 10 parked calls wake
		wg.Wait()
		assert.Equal(t, int64(10), ok.Load())
	})
}

// fakeBreaker opens after threshold failures in a row, and records what
// Do told it.
type fakeBreaker struct {
	mu        sync.Mutex
	open      bool
	threshold int
	inARow    int
	allowed   int
	refused   int
	reports   []string // "ok", "failed" or "not counted", as done heard it
}

func (b *fakeBreaker) Allow() (func(error), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open {
		b.refused++
		return nil, errors.Join(overload.ErrCircuitOpen, errors.New("fake breaker: open"))
	}
	b.allowed++
	return func(err error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		failed := false
		switch {
		case err == nil:
			b.reports = append(b.reports, "ok")
		case errors.Is(err, overload.ErrNotCounted):
			b.reports = append(b.reports, "not counted")
		default:
			failed = true
			b.reports = append(b.reports, "failed")
		}
		if b.inARow = 0; failed {
			b.inARow++
		}
		if failed && b.threshold > 0 && len(b.reports) >= b.threshold {
			b.open = true
		}
	}, nil
}

func TestBreaker_openFailsFastWithTheLastRealError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		br := &fakeBreaker{threshold: 2}
		stats := new(retrystats.Stats)
		r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Breaker: br, NoBudget: true}), retry.WithMaxAttempts(5),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter), retry.WithObserver(stats))
		var calls int
		start := time.Now()
		err := r.Do(t.Context(), func(context.Context) error { calls++; return errTransient })
		assert.Equal(t, 2, calls, "the breaker opens after the second failure")
		assert.Equal(t, 2*time.Second, time.Since(start), "the wait before each later attempt; none after the refusal")
		require.ErrorIs(t, err, overload.ErrCircuitOpen)
		require.ErrorIs(t, err, errTransient)
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, retry.OutcomeRefused, re.Outcome)
		assert.Equal(t, 2, re.Attempts, "a refused attempt is not made")
		assert.Equal(t, []string{"failed", "failed"}, br.reports)

		// Open from the start: fn is never called, no attempt counts.
		calls = 0
		start = time.Now()
		err = r.Do(t.Context(), func(context.Context) error { calls++; return nil })
		assert.Zero(t, calls)
		assert.Zero(t, time.Since(start))
		require.ErrorIs(t, err, overload.ErrCircuitOpen)
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 0, re.Attempts)
		assert.Nil(t, re.Last)
		s := stats.Snapshot()
		assert.Equal(t, uint64(2), s.CircuitOpen)
		assert.Equal(t, uint64(1), s.NoAttempt)
		assert.Zero(t, s.InFlight)
		assert.Zero(t, s.Waiting)
	})
}

func TestBreaker_permanentErrorsAndSuccessesAreNotFailures(t *testing.T) {
	br := &fakeBreaker{}
	r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Breaker: br}), retry.WithBackoff(retry.Constant(0)))
	require.NoError(t, r.Do(t.Context(), succeed))
	_ = r.Do(t.Context(), func(context.Context) error { return retry.Permanent(errTransient) })
	ctx, cancel := context.WithCancel(t.Context())
	_ = r.Do(ctx, func(context.Context) error { cancel(); return context.Canceled })
	inner := mustNew(t, retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithMaxAttempts(1))
	_ = r.Do(t.Context(), func(ctx context.Context) error { return inner.Do(ctx, failOnce) })
	picky := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Breaker: br}), retry.WithRetryIf(func(error) bool { return false }))
	_ = picky.Do(t.Context(), failOnce)
	_ = r.Do(t.Context(), func(context.Context) error {
		return errors.New("boom")
	})
	assert.Equal(t, []string{"ok", "ok", "not counted", "not counted", "ok", "failed", "failed", "failed"}, br.reports,
		"success, permanent, cancelled, another Retrier's give-up, refused by WithRetryIf, then three real failures")
}

// TestNested_oneLayerRetries stacks three Retriers of 3 attempts over a
// leaf that always fails: only the innermost retries.
func TestNested_oneLayerRetries(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []retry.Option
		leafs int
	}{
		{"default", nil, 3},
		{"nested_retries", []retry.Option{retry.WithOverload(&retry.OverloadOptions{NestedRetries: true})}, 27},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var leaf int
			layer := func(inner func(context.Context) error) func(context.Context) error {
				r := mustNew(t, append([]retry.Option{retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithMaxAttempts(3),
					retry.WithBackoff(retry.Constant(0))}, tc.opts...)...)
				return func(ctx context.Context) error { return r.Do(ctx, inner) }
			}
			top := layer(layer(layer(func(context.Context) error { leaf++; return errTransient })))
			err := top(t.Context())
			assert.Equal(t, tc.leafs, leaf)
			require.ErrorIs(t, err, errTransient)
			require.ErrorIs(t, err, retry.ErrExhausted)
			var re *retry.Error
			require.ErrorAs(t, err, &re)
			assert.Equal(t, retry.OutcomeExhausted, re.Outcome, "the outer layer ends as the inner one did")
			assert.False(t, retry.IsPermanent(err), "exhausted is not permanent: a queue may retry the job later")
		})
	}
}

func TestNested_refusedInnerEndsTheOuterCall(t *testing.T) {
	b := &countingBudget{}
	inner := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Budget: b}))
	outer := mustNew(t, retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithBackoff(retry.Constant(0)))
	var leaf int
	err := outer.Do(t.Context(), func(ctx context.Context) error {
		return inner.Do(ctx, func(context.Context) error { leaf++; return errTransient })
	})
	assert.Equal(t, 1, leaf)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.OutcomeRefused, re.Outcome)
	assert.Equal(t, 1, re.Attempts)
}

func TestBreaker_panicInFnIsAFailure(t *testing.T) {
	br := &fakeBreaker{}
	r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Breaker: br}))
	assert.Panics(t, func() {
		_ = r.Do(t.Context(), func(context.Context) error { panic("boom") })
	})
	assert.Equal(t, []string{"failed"}, br.reports, "done is called, so a half-open breaker is not stuck")
}

// A panic in WithRetryIf, which judges the attempt's error for the
// breaker, is a failure too: done is still called, once.
func TestBreaker_panicInRetryIfIsAFailure(t *testing.T) {
	br := &fakeBreaker{}
	r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Breaker: br}), retry.WithRetryIf(func(error) bool { panic("classifier bug") }))
	assert.PanicsWithValue(t, "classifier bug", func() { _ = r.Do(t.Context(), failOnce) })
	assert.Equal(t, 1, br.allowed)
	assert.Equal(t, []string{"failed"}, br.reports, "done is called, so a half-open breaker is not stuck")
}

// peekingBreaker can say it would refuse without reserving anything.
type peekingBreaker struct{ fakeBreaker }

func (b *peekingBreaker) Refuses() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open {
		return errors.Join(overload.ErrCircuitOpen, errors.New("fake breaker: open"))
	}
	return nil
}

func TestBreaker_thatCanTellSpendsNoWaitOnceOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		br := &peekingBreaker{fakeBreaker{threshold: 2}}
		stats := new(retrystats.Stats)
		r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Breaker: br, NoBudget: true}), retry.WithMaxAttempts(5),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter), retry.WithObserver(stats))
		start := time.Now()
		err := r.Do(t.Context(), func(context.Context) error { return errTransient })
		assert.Equal(t, time.Second, time.Since(start), "one wait, before attempt 2; none after it tripped the breaker")
		require.ErrorIs(t, err, overload.ErrCircuitOpen)
		require.ErrorIs(t, err, errTransient)
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, retry.OutcomeRefused, re.Outcome)
		assert.Equal(t, 2, re.Attempts)
		assert.Equal(t, 2, br.allowed, "Refuses reserves nothing")
		assert.Zero(t, stats.Snapshot().Waiting)
	})
}

// TestBudget_onlySuccessRefunds: as gRFC A6 counts, Do refunds the bucket
// for a success alone; a permanent answer (Permanent, WithRetryIf
// refusing) and an attempt the caller's context ended leave it as it is,
// and a retryable failure takes a token.
func TestBudget_onlySuccessRefunds(t *testing.T) {
	cancelled := func() (context.Context, func(context.Context) error) {
		ctx, cancel := context.WithCancel(context.Background())
		return ctx, func(ctx context.Context) error { cancel(); return ctx.Err() }
	}
	for _, tc := range []struct {
		name string
		call func(t *testing.T, b *overload.TokenBucket) error
		want float64
	}{
		{"success", func(t *testing.T, b *overload.TokenBucket) error {
			return mustNew(t, retry.WithOverload(&retry.OverloadOptions{Budget: b})).Do(context.Background(), func(context.Context) error { return nil })
		}, 6.5},
		{"context_ended", func(t *testing.T, b *overload.TokenBucket) error {
			ctx, fn := cancelled()
			return mustNew(t, retry.WithOverload(&retry.OverloadOptions{Budget: b})).Do(ctx, fn)
		}, 6},
		{"permanent", func(t *testing.T, b *overload.TokenBucket) error {
			return mustNew(t, retry.WithOverload(&retry.OverloadOptions{Budget: b})).Do(context.Background(), func(context.Context) error { return retry.Permanent(errTransient) })
		}, 6},
		{"retry_if_refuses", func(t *testing.T, b *overload.TokenBucket) error {
			return mustNew(t, retry.WithOverload(&retry.OverloadOptions{Budget: b}), retry.WithRetryIf(func(error) bool { return false })).
				Do(context.Background(), func(context.Context) error { return errTransient })
		}, 6},
		{"inner_retrier_gave_up", func(t *testing.T, b *overload.TokenBucket) error {
			inner := mustNew(t, retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithMaxAttempts(1))
			return mustNew(t, retry.WithOverload(&retry.OverloadOptions{Budget: b})).Do(context.Background(), func(ctx context.Context) error {
				return inner.Do(ctx, func(context.Context) error { return errTransient })
			})
		}, 6},
		{"retryable_failure_last_attempt", func(t *testing.T, b *overload.TokenBucket) error {
			return mustNew(t, retry.WithOverload(&retry.OverloadOptions{Budget: b}), retry.WithMaxAttempts(1)).Do(context.Background(), func(context.Context) error { return errTransient })
		}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.5})
			require.NoError(t, err)
			for range 4 {
				b.Attempted(1, true, false)
			}
			require.Equal(t, 6.0, b.Tokens())
			_ = tc.call(t, b)
			assert.Equal(t, tc.want, b.Tokens())
		})
	}
}

// TestRatio_countsOnlyCallsItHears: a Ratio counts a call whose first
// attempt succeeded or failed worth retrying, not one that ended with a
// permanent answer: with no reserve and a ratio of 1, 2 such calls allow
// 2 retries, and permanent ones add none.
func TestRatio_countsOnlyCallsItHears(t *testing.T) {
	b, err := overload.NewRatio(overload.RatioOptions{Ratio: 1, MinPerSecond: overload.None})
	require.NoError(t, err)
	require.ErrorIs(t, b.Retry(0), overload.ErrBudgetExhausted, "no call yet, no reserve: no retry")
	r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Budget: b}))
	for range 5 {
		_ = r.Do(context.Background(), func(context.Context) error { return retry.Permanent(errTransient) })
	}
	for range 2 {
		require.NoError(t, r.Do(context.Background(), func(context.Context) error { return nil }))
	}
	require.NoError(t, b.Retry(0))
	require.NoError(t, b.Retry(0))
	require.ErrorIs(t, b.Retry(0), overload.ErrBudgetExhausted, "2 calls heard: 2 retries")
}

// TestBudget_serverDelayOnARefusedError: an error that WithRetryIf refuses
// but that carries a server's delay is retried and heard as a throttled
// failure; under Permanent it is neither.
func TestBudget_serverDelayOnARefusedError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &countingBudget{allow: 10}
		r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Budget: b}), retry.WithMaxAttempts(2), retry.WithRetryIf(func(error) bool { return false }))
		calls := 0
		_ = r.Do(t.Context(), func(context.Context) error { calls++; return retry.After(errTransient, time.Second) })
		assert.Equal(t, 2, calls, "retried: the server said when to come back")
		assert.Equal(t, 2, b.throttled)
		assert.Equal(t, 1, b.retries)

		*b = countingBudget{allow: 10}
		calls = 0
		_ = r.Do(t.Context(), func(context.Context) error { calls++; return retry.Permanent(retry.After(errTransient, time.Second)) })
		assert.Equal(t, 1, calls)
		assert.Zero(t, b.attempted, "a permanent answer is not heard")
		assert.Zero(t, b.retries)
	})
}

// TestBudget_notAskedToLookAgainAtAHeldKey: with FailWhileHeld, an attempt
// that found the key held did not reach the downstream, so the wait before
// the next look asks no budget: even an empty budget lets 20 callers wait
// for the holder, and they replay its outcome.
func TestBudget_notAskedToLookAgainAtAHeldKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		cl, err := store.Claim(t.Context(), "k", "", time.Minute)
		require.NoError(t, err)
		empty, err := overload.NewRatio(overload.RatioOptions{Ratio: overload.None, MinPerSecond: overload.None})
		require.NoError(t, err)
		r := mustNew(t, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", FailWhileHeld: true}),
			retry.WithOverload(&retry.OverloadOptions{Budget: empty}), retry.WithMaxAttempts(math.MaxInt), retry.WithBackoff(retry.Constant(5*time.Millisecond)), retry.WithJitter(retry.NoJitter))
		var wg sync.WaitGroup
		var calls atomic.Int32
		for range 20 {
			wg.Go(func() {
				assert.NoError(t, r.Do(t.Context(), func(context.Context) error { calls.Add(1); return nil }))
			})
		}
		time.Sleep(time.Second)
		require.NoError(t, store.Complete(t.Context(), "k", cl.Token, idempotency.StoredOutcome{}, time.Hour))
		wg.Wait()
		assert.Zero(t, calls.Load(), "every caller replays the holder's success")
	})
}

// TestBudget_givesBackOnlyTheWaitsItAllowed: a budget hears Waited once for
// each wait its Retry allowed, and not after a look at a held key, which it
// was not asked about: a MaxWaiting bound would otherwise count waits that
// never entered it, and let more calls park than it allows.
func TestBudget_givesBackOnlyTheWaitsItAllowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &countingBudget{allow: 10}
		_, err := callAfterAHeldKey(t, b)
		require.NoError(t, err)
		b.mu.Lock()
		defer b.mu.Unlock()
		assert.Equal(t, 1, b.retries, "asked only before the retry of the failed call of fn")
		assert.Equal(t, b.retries, b.waited, "Waited once per wait that Retry allowed")
	})
}

// callAfterAHeldKey makes an idempotent call with FailWhileHeld, and b as
// its budget, whose key another caller holds for its first few looks; its
// fn fails once, then succeeds. It returns fn's calls and Do's error.
func callAfterAHeldKey(t *testing.T, b overload.Budget) (int32, error) {
	t.Helper()
	store := memstore.New(nil)
	cl, err := store.Claim(t.Context(), "k", "", time.Minute)
	require.NoError(t, err)
	r := mustNew(t, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", FailWhileHeld: true}),
		retry.WithOverload(&retry.OverloadOptions{Budget: b}), retry.WithMaxAttempts(math.MaxInt),
		retry.WithBackoff(retry.Constant(5*time.Millisecond)), retry.WithJitter(retry.NoJitter))
	var calls atomic.Int32
	done := make(chan error)
	go func() {
		done <- r.Do(t.Context(), func(context.Context) error {
			if calls.Add(1) == 1 {
				return errors.New("blip")
			}
			return nil
		})
	}()
	time.Sleep(20 * time.Millisecond) // a few looks at the held key
	require.NoError(t, store.Release(t.Context(), "k", cl.Token))
	err = <-done
	return calls.Load(), err
}

// TestBudget_ratioCountsACallWhoseFirstLooksFoundTheKeyHeld: with
// FailWhileHeld, the looks at a held key are attempts that do not call fn,
// so the attempt that then calls fn is not attempt 1; a Ratio, which
// counts a call at attempt 1 only, never counted this one, yet was asked
// for its retry. With Ratio 1 and no reserve, the call's one retry must be
// allowed: the call made one call of the downstream.
func TestBudget_ratioCountsACallWhoseFirstLooksFoundTheKeyHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := overload.NewRatio(overload.RatioOptions{Ratio: 1, MinPerSecond: overload.None})
		require.NoError(t, err)
		calls, err := callAfterAHeldKey(t, b)
		assert.NoError(t, err, "the call's one retry is within Ratio 1 of its one call")
		assert.EqualValues(t, 2, calls)
	})
}

// TestBudget_notToldOfAnAttemptPastTheDeadline: an attempt that returns
// once the context's deadline has passed, before the context's own timer
// has said so, ends the call as the context's end does (decide reads the
// deadline: OutcomeUnknown with context.DeadlineExceeded), so the budget,
// as the Budget doc says of an attempt ended by the call's context, hears
// neither a success nor a failure. judge read ctx.Err() alone and told a
// failure: the token bucket lost a token.
func TestBudget_notToldOfAnAttemptPastTheDeadline(t *testing.T) {
	mock := clock.NewMock()
	mock.Set(time.Now())
	b, err := overload.NewTokenBucket(overload.TokenBucketOptions{})
	require.NoError(t, err)
	r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Budget: b}), retry.WithClock(mock))
	ctx, cancel := context.WithDeadline(context.Background(), mock.Now().Add(time.Minute))
	defer cancel()
	err = r.Do(ctx, func(context.Context) error {
		mock.Add(2 * time.Minute) // the attempt outlasts the deadline
		return errors.New("i/o timeout")
	})
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.OutcomeUnknown, re.Outcome)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 100.0, b.Tokens(), "an attempt the deadline ended is heard as neither")
}

// TestRatio_everyEntryPointCountsAFirstTrySuccess: Do and DoValueOn count
// New's default kind of budget inline, the package-level Do and DoValue
// through firstSucceeded; each first-try success is one call heard, so
// a Ratio of 1 with no reserve then allows exactly four retries.
func TestRatio_everyEntryPointCountsAFirstTrySuccess(t *testing.T) {
	ctx := context.Background()
	b, err := overload.NewRatio(overload.RatioOptions{Ratio: 1, MinPerSecond: overload.None})
	require.NoError(t, err)
	opt := retry.WithOverload(&retry.OverloadOptions{Budget: b})
	r := mustNew(t, opt)
	value := func(context.Context) (int, error) { return 1, nil }
	require.NoError(t, r.Do(ctx, func(context.Context) error { return nil }))
	_, err = retry.DoValueOn(ctx, r, value)
	require.NoError(t, err)
	require.NoError(t, retry.Do(ctx, func(context.Context) error { return nil }, opt))
	_, err = retry.DoValue(ctx, value, opt)
	require.NoError(t, err)
	for i := range 4 {
		require.NoError(t, b.Retry(0), "retry %d of 4", i+1)
	}
	require.ErrorIs(t, b.Retry(0), overload.ErrBudgetExhausted, "4 calls heard: 4 retries")
}
