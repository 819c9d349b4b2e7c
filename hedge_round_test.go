package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/overload"
)

// hedged is a Retrier with a fixed hedge delay of 10ms and no budget, so
// that only what a test adds refuses a hedge.
func hedged(t *testing.T, opts ...retry.Option) *retry.Retrier {
	t.Helper()
	r, err := retry.New(append([]retry.Option{retry.WithHedge(&retry.HedgeOptions{Delay: 10 * time.Millisecond}),
		retry.WithOverload(&retry.OverloadOptions{NoBudget: true})}, opts...)...)
	require.NoError(t, err)
	return r
}

// attempts numbers the attempts of one call, which may run at once.
type attempts struct {
	n      atomic.Int32
	since  time.Time // set: next keeps when each attempt started, since it
	mu     sync.Mutex
	causes map[int32]error // the cause each attempt's context ended with
	at     []time.Duration
}

func (a *attempts) next() int32 {
	if !a.since.IsZero() {
		a.mu.Lock()
		a.at = append(a.at, time.Since(a.since))
		a.mu.Unlock()
	}
	return a.n.Add(1)
}

// startedAt is when each attempt started, since a.since, in order.
func (a *attempts) startedAt() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.at
}

// ended waits for ctx to end and keeps its cause for attempt k.
func (a *attempts) ended(ctx context.Context, k int32) error {
	<-ctx.Done()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.causes == nil {
		a.causes = map[int32]error{}
	}
	a.causes[k] = context.Cause(ctx)
	return ctx.Err()
}

func (a *attempts) cause(k int32) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.causes[k]
}

// closer is a value with a Close, as a response is.
type closer struct{ closed atomic.Bool }

func (c *closer) Close() error { c.closed.Store(true); return nil }

func TestHedge_firstSuccessWinsAndTheRestAreCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var obs recordingObserver
		r := hedged(t, retry.WithObserver(&obs))
		var a attempts
		late, won := &closer{}, &closer{}
		start := time.Now()
		v, err := retry.HedgeValue(t.Context(), r, func(ctx context.Context) (*closer, error) {
			switch k := a.next(); k {
			case 1: // the slow one: it answers only once cancelled, too late
				_ = a.ended(ctx, k)
				return late, nil
			default:
				time.Sleep(5 * time.Millisecond)
				return won, nil
			}
		})
		require.NoError(t, err)
		assert.Same(t, won, v)
		assert.Equal(t, 15*time.Millisecond, time.Since(start), "the hedge starts at 10ms and answers 5ms later")
		synctest.Wait()
		assert.ErrorIs(t, a.cause(1), retry.ErrHedgeLost)
		assert.True(t, late.closed.Load(), "the loser's value is closed")
		assert.False(t, won.closed.Load(), "the winner's is the caller's")
		assert.EqualValues(t, 2, a.n.Load())
		done := obs.done()
		require.Len(t, done, 1)
		assert.Equal(t, 2, done[0].Attempts)
		assert.Equal(t, []int{1, 2}, obs.startedAttempts())
	})
}

func TestHedge_answerWithinTheDelayStartsNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := hedged(t)
		before := runtime.NumGoroutine()
		var during int
		calls := 0
		err := r.Hedge(t.Context(), func(context.Context) error {
			calls++
			time.Sleep(9 * time.Millisecond)
			during = runtime.NumGoroutine()
			return nil
		})
		require.NoError(t, err)
		time.Sleep(time.Second) // past the delay: the timer was stopped
		synctest.Wait()
		assert.Equal(t, 1, calls)
		assert.Equal(t, before, during)
		assert.Equal(t, before, runtime.NumGoroutine())
	})
}

func TestHedge_permanentFailureEndsTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := hedged(t)
		var a attempts
		denied := errors.New("denied")
		start := time.Now()
		err := r.Hedge(t.Context(), func(ctx context.Context) error {
			if k := a.next(); k == 1 {
				return a.ended(ctx, k)
			}
			time.Sleep(time.Millisecond)
			return retry.Permanent(denied)
		})
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retry.OutcomePermanent, e.Outcome)
		assert.ErrorIs(t, err, denied)
		assert.Equal(t, 2, e.Attempts)
		assert.Equal(t, 11*time.Millisecond, time.Since(start))
		synctest.Wait()
		assert.ErrorIs(t, a.cause(1), retry.ErrHedgeLost)
	})
}

func TestHedge_retryableFailureLetsTheOthersRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := hedged(t)
		var a attempts
		start := time.Now()
		v, err := retry.HedgeValue(t.Context(), r, func(ctx context.Context) (int32, error) {
			switch k := a.next(); k {
			case 1:
				time.Sleep(30 * time.Millisecond)
				return k, nil
			case 2:
				time.Sleep(time.Millisecond)
				return 0, errors.New("unavailable")
			default:
				return 0, a.ended(ctx, k)
			}
		})
		require.NoError(t, err)
		assert.EqualValues(t, 1, v, "the first attempt's answer")
		assert.Equal(t, 30*time.Millisecond, time.Since(start))
		synctest.Wait()
		assert.EqualValues(t, 3, a.n.Load(), "the third started at 20ms, 10ms after the second")
		assert.ErrorIs(t, a.cause(3), retry.ErrHedgeLost)
	})
}

// Once every attempt of a turn has failed, the loop waits its backoff
// and the next turn hedges again.
func TestHedge_allFailedThenTheLoopWaitsAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := hedged(t, retry.WithMaxAttempts(4), retry.WithBackoff(retry.Constant(50*time.Millisecond)),
			retry.WithJitter(retry.NoJitter))
		var a attempts
		a.since = time.Now()
		v, err := retry.HedgeValue(t.Context(), r, func(ctx context.Context) (int32, error) {
			k := a.next()
			switch k {
			case 1:
				time.Sleep(5 * time.Millisecond)
				return 0, errors.New("unavailable")
			case 2:
				return 0, a.ended(ctx, 2)
			default:
				return k, nil
			}
		})
		require.NoError(t, err)
		assert.EqualValues(t, 3, v)
		// Attempt 1 fails at 5ms, before the hedge delay of 10ms, with no
		// other running: the turn is over, the loop waits 50ms; attempt 2
		// starts at 55ms, and its hedge, attempt 3, at 65ms answers.
		assert.Equal(t, []time.Duration{0, 55 * time.Millisecond, 65 * time.Millisecond}, a.startedAt())
		assert.ErrorIs(t, a.cause(2), retry.ErrHedgeLost)
	})
}

// A failure worth retrying while another attempt still runs sends the
// next hedge at once, as gRFC A6 does, instead of after the hedge delay:
// the delay guesses that an attempt is slow, a failure says so.
func TestHedge_failureSendsTheNextHedgeAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := hedged(t, retry.WithMaxAttempts(5), retry.WithBackoff(retry.Constant(50*time.Millisecond)),
			retry.WithJitter(retry.NoJitter))
		var a attempts
		a.since = time.Now()
		v, err := retry.HedgeValue(t.Context(), r, func(ctx context.Context) (int32, error) {
			k := a.next()
			d := map[int32]time.Duration{1: 15 * time.Millisecond, 2: 8 * time.Millisecond, 3: 10 * time.Millisecond}[k]
			if d == 0 {
				return k, nil
			}
			select {
			case <-time.After(d):
				return 0, errors.New("unavailable")
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		})
		require.NoError(t, err)
		assert.EqualValues(t, 4, v)
		// Attempt 2 is a hedge at 10ms. Attempt 1 fails at 15ms while 2
		// runs: attempt 3 starts then, not at 20ms. Attempt 2 fails at
		// 18ms while 3 runs: attempt 4 starts then, and answers.
		assert.Equal(t, []time.Duration{0, 10 * time.Millisecond, 15 * time.Millisecond, 18 * time.Millisecond}, a.startedAt())
	})
}

func TestHedge_budgetBelowItsThresholdSendsNoHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 10})
		require.NoError(t, err)
		for range 6 { // 10 - 6 = 4 tokens, at or below half: no retries
			b.Attempted(2, true, false)
		}
		r := hedged(t, retry.WithOverload(&retry.OverloadOptions{Budget: b}))
		calls := 0
		start := time.Now()
		err = r.Hedge(t.Context(), func(context.Context) error {
			calls++
			time.Sleep(30 * time.Millisecond)
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, 1, calls)
		assert.Equal(t, 30*time.Millisecond, time.Since(start))
	})
}

// gate is a Breaker that allows n attempts, counting what it is asked.
type gate struct {
	mu      sync.Mutex
	allowed int
	asked   int
	heard   []error
}

func (g *gate) Allow() (func(error), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked++
	if g.allowed == 0 {
		return nil, overload.ErrCircuitOpen
	}
	g.allowed--
	return func(err error) { g.mu.Lock(); g.heard = append(g.heard, err); g.mu.Unlock() }, nil
}

func TestHedge_breakerIsAskedBeforeEachHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gate{allowed: 1}
		r := hedged(t, retry.WithOverload(&retry.OverloadOptions{Breaker: g}))
		calls := 0
		err := r.Hedge(t.Context(), func(context.Context) error {
			calls++
			time.Sleep(30 * time.Millisecond)
			return nil
		})
		require.NoError(t, err)
		synctest.Wait()
		assert.Equal(t, 1, calls, "the open breaker sent no hedge")
		assert.Equal(t, 2, g.asked)
		assert.Equal(t, []error{nil}, g.heard)
	})
}

// completionCounter counts the outcomes a store records.
type completionCounter struct {
	idempotency.Store
	completed atomic.Int32
}

func (s *completionCounter) Complete(ctx context.Context, key, token string, out idempotency.StoredOutcome, retention time.Duration) error {
	s.completed.Add(1)
	return s.Store.Complete(ctx, key, token, out, retention)
}

func TestHedge_idempotentCallRecordsOneOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &completionCounter{Store: memstore.New(nil)}
		r := hedged(t, retry.WithIdempotency(store, nil))
		ctx := retry.ContextWithIdempotencyKey(t.Context(), "order-1")
		var a attempts
		fn := func(ctx context.Context) (int32, error) {
			k := a.next()
			if k == 1 {
				return 0, a.ended(ctx, k)
			}
			time.Sleep(time.Millisecond)
			return 40 + k, nil
		}
		v, err := retry.HedgeValue(ctx, r, fn)
		require.NoError(t, err)
		assert.EqualValues(t, 42, v)
		synctest.Wait()
		assert.EqualValues(t, 1, store.completed.Load(), "one outcome for the call's two attempts")

		again, err := retry.HedgeValue(ctx, r, fn)
		require.NoError(t, err)
		assert.EqualValues(t, 42, again, "a second caller replays it")
		assert.EqualValues(t, 2, a.n.Load(), "and calls nothing")
	})
}

func TestHedge_panicInAHedgeReachesTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := hedged(t)
		var a attempts
		defer synctest.Wait()
		assert.PanicsWithValue(t, "boom", func() {
			_ = r.Hedge(t.Context(), func(ctx context.Context) error {
				if k := a.next(); k == 1 {
					return a.ended(ctx, k)
				}
				panic("boom")
			})
		})
	})
}

func TestHedge_contextEndsWhileAttemptsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := hedged(t)
		var a attempts
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Millisecond)
		defer cancel()
		err := r.Hedge(ctx, func(ctx context.Context) error {
			return a.ended(ctx, a.next())
		})
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retry.OutcomeUnknown, e.Outcome, "fn was running when the deadline passed")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 2, e.Attempts)
		synctest.Wait()
		assert.ErrorIs(t, a.cause(1), context.DeadlineExceeded)
	})
}

// TestHedge_manyConcurrentCalls runs on the real clock, with a hedge
// delay of 1ms: under synctest, so many goroutines make the race detector
// crash now and then (golang/go#78156).
func TestHedge_manyConcurrentCalls(t *testing.T) {
	var obs recordingObserver
	r, err := retry.New(retry.WithHedge(&retry.HedgeOptions{Delay: time.Millisecond}), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}),
		retry.WithObserver(&obs))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 1000 {
		wg.Go(func() {
			var a attempts
			var n int
			v, err := retry.HedgeValue(t.Context(), r, func(ctx context.Context) (int, error) {
				k := a.next()
				if k == 1 && i%2 == 1 {
					return 0, a.ended(ctx, k) // only a hedge can answer
				}
				return i, nil
			})
			n = int(a.n.Load())
			assert.NoError(t, err)
			assert.Equal(t, i, v)
			if i%2 == 1 {
				assert.GreaterOrEqual(t, n, 2)
			}
		})
	}
	wg.Wait()
	assert.Len(t, obs.done(), 1000)
	assert.Eventually(t, func() bool { return obs.startCount() == obs.endCount() }, time.Second, time.Millisecond,
		"every attempt that started ends, the losers' too")
}

func TestHedge_adaptiveDelayFollowsTheAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := retry.New(retry.WithHedge(&retry.HedgeOptions{Window: 100}), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		require.NoError(t, err)
		slow := func(ctx context.Context, k int32) error {
			if k == 1 {
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
					return ctx.Err()
				}
				return nil
			}
			time.Sleep(time.Millisecond)
			return nil
		}
		// Before the window holds 10 latencies the delay is not known:
		// a slow first attempt gets no hedge.
		var a attempts
		start := time.Now()
		require.NoError(t, r.Hedge(t.Context(), func(ctx context.Context) error { return slow(ctx, a.next()) }))
		assert.Equal(t, time.Second, time.Since(start))
		for i := range 99 { // latencies 1..10ms, 10 of each
			d := time.Duration(i%10+1) * time.Millisecond
			require.NoError(t, r.Hedge(t.Context(), func(context.Context) error { time.Sleep(d); return nil }))
		}
		// 1 latency of 1s and 99 of 1..10ms: the 97th is 10ms.
		var b attempts
		start = time.Now()
		require.NoError(t, r.Hedge(t.Context(), func(ctx context.Context) error { return slow(ctx, b.next()) }))
		assert.Equal(t, 11*time.Millisecond, time.Since(start), "a hedge at 10ms answered 1ms later")
		synctest.Wait()
	})
}

// A Delay given with the adaptive settings serves until the window has
// warmed up: a new process hedges its first calls too, then follows its
// attempts' latency.
func TestHedge_delayServesUntilTheWindowWarmsUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := retry.New(retry.WithHedge(&retry.HedgeOptions{Delay: 50 * time.Millisecond, Percentile: 0.97, Window: 100}),
			retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		require.NoError(t, err)
		slow := func(ctx context.Context, k int32) error {
			if k == 1 {
				return (&attempts{}).ended(ctx, 1)
			}
			time.Sleep(time.Millisecond)
			return nil
		}
		var a attempts
		start := time.Now()
		require.NoError(t, r.Hedge(t.Context(), func(ctx context.Context) error { return slow(ctx, a.next()) }))
		assert.Equal(t, 51*time.Millisecond, time.Since(start), "a hedge at the warm-up delay, 50ms")
		for range 99 {
			require.NoError(t, r.Hedge(t.Context(), func(context.Context) error { time.Sleep(2 * time.Millisecond); return nil }))
		}
		var b attempts
		start = time.Now()
		require.NoError(t, r.Hedge(t.Context(), func(ctx context.Context) error { return slow(ctx, b.next()) }))
		assert.Equal(t, 3*time.Millisecond, time.Since(start), "warm: a hedge at the 97th, 2ms")
		synctest.Wait()
	})
}

func TestHedge_needsWithHedge(t *testing.T) {
	r, err := retry.New()
	require.NoError(t, err)
	assert.False(t, r.Hedges())
	called := false
	err = r.Hedge(t.Context(), func(context.Context) error { called = true; return nil })
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.ErrorContains(t, err, "WithHedge")
	assert.False(t, called)
	assert.True(t, hedged(t).Hedges())

	var nilR *retry.Retrier
	assert.ErrorIs(t, nilR.Hedge(t.Context(), func(context.Context) error { return nil }), retry.ErrInvalidOption)
	_, err = retry.HedgeValue[int](t.Context(), hedged(t), nil)
	assert.ErrorIs(t, err, retry.ErrInvalidOption)
}

func TestHedge_doDoesNotHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := hedged(t)
		calls := 0
		err := r.Do(t.Context(), func(context.Context) error {
			calls++
			time.Sleep(time.Second)
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, 1, calls)
	})
}

// TestHedge_firstAttemptWinsAfterAHedgeFailed: the hedge (attempt 2 of 2)
// fails with a retryable error while the first attempt runs; the first
// then succeeds, and the call returns its value, not the hedge's failure
// (found by retryhttp's hedging, on the first version of awaitRound).
func TestHedge_firstAttemptWinsAfterAHedgeFailed(t *testing.T) {
	r, err := retry.New(retry.WithMaxAttempts(2), retry.WithBackoff(retry.Constant(0)),
		retry.WithHedge(&retry.HedgeOptions{Delay: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	hedge := make(chan context.Context, 1)
	var calls atomic.Int32
	v, err := retry.HedgeValue(context.Background(), r, func(ctx context.Context) (string, error) {
		if calls.Add(1) == 1 {
			select {
			case hctx := <-hedge:
				<-hctx.Done() // the hedge's context ends once its failure is recorded
				return "first", nil
			case <-ctx.Done():
				return "", context.Cause(ctx)
			}
		}
		hedge <- ctx
		return "", errors.New("retryable")
	})
	if err != nil || v != "first" {
		t.Fatalf("HedgeValue = %q, %v; want the first attempt's success", v, err)
	}
}

// TestHedge_timerIsArmedUnderTheRoundsLock is for -race: the hedge timer
// may fire before afterFunc returns, so hedging keeps it in the round
// under the lock that fire takes.
func TestHedge_timerIsArmedUnderTheRoundsLock(t *testing.T) {
	r, err := retry.New(retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)),
		retry.WithHedge(&retry.HedgeOptions{Delay: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var calls atomic.Int32
	v, err := retry.HedgeValue(context.Background(), r, func(ctx context.Context) (int32, error) {
		n := calls.Add(1)
		if n == 1 {
			<-started
			<-ctx.Done() // the hedge won
			return 0, ctx.Err()
		}
		close(started)
		return n, nil
	})
	if err != nil || v != 2 {
		t.Fatalf("HedgeValue = %d, %v; want the hedge's 2", v, err)
	}
}

// The latest failure to arrive need not be the highest-numbered attempt:
// hedge 2 fails after hedge 3, and the loop goes on from the call's count
// (3 of 3), not from the decision hedge 2 made with its own number.
func TestHedge_theLatestFailureIsRuledWithTheCallsCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := hedged(t, retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)))
		var n atomic.Int32
		errBoom := errors.New("boom")
		err := r.Hedge(t.Context(), func(ctx context.Context) error {
			switch n.Add(1) {
			case 1: // 0..25ms
				time.Sleep(25 * time.Millisecond)
			case 2: // 10..50ms: the last to fail
				time.Sleep(40 * time.Millisecond)
			case 3: // 20..30ms
				time.Sleep(10 * time.Millisecond)
			}
			return errBoom
		})
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, int32(3), n.Load(), "fn called at most WithMaxAttempts times")
		assert.Equal(t, 3, e.Attempts)
		assert.Equal(t, retry.OutcomeExhausted, e.Outcome)
	})
}

// A panic in the first attempt's fn, on the caller's goroutine, ends the
// round: the hedge in flight is cancelled, and no new one starts after
// Hedge has panicked out.
func TestHedge_panicInTheFirstAttemptEndsTheRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := hedged(t, retry.WithMaxAttempts(3))
		var n atomic.Int32
		var mu sync.Mutex
		cancelled := map[int32]bool{}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel() // ends what the call leaked, so that the bubble can exit
		func() {
			defer func() { require.Equal(t, "boom", recover()) }()
			_ = r.Hedge(ctx, func(ctx context.Context) error {
				k := n.Add(1)
				if k == 1 {
					time.Sleep(15 * time.Millisecond) // hedge 2 started at 10ms
					panic("boom")
				}
				select {
				case <-ctx.Done():
					mu.Lock()
					cancelled[k] = true
					mu.Unlock()
				case <-time.After(time.Hour):
				}
				return ctx.Err()
			})
		}()
		time.Sleep(100 * time.Millisecond)
		assert.Equal(t, int32(2), n.Load(), "no hedge starts after the call panicked out")
		mu.Lock()
		assert.True(t, cancelled[2], "the hedge in flight is cancelled when the call unwinds")
		mu.Unlock()
	})
}

// The same with a panic in WithRetryIf, asked about the first attempt's
// error while the round is open.
func TestHedge_panicInRetryIfEndsTheRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := hedged(t, retry.WithMaxAttempts(3), retry.WithRetryIf(func(error) bool { panic("retryIf") }))
		var n atomic.Int32
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		func() {
			defer func() { require.Equal(t, "retryIf", recover()) }()
			_ = r.Hedge(ctx, func(ctx context.Context) error {
				if n.Add(1) == 1 {
					time.Sleep(15 * time.Millisecond)
					return errors.New("first")
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Hour):
				}
				return nil
			})
		}()
		time.Sleep(100 * time.Millisecond)
		assert.Equal(t, int32(2), n.Load(), "no hedge starts after the call panicked out")
	})
}

// WithIdempotency: a renewal that fails cuts fn off, and a hedged call
// ends as Do's does, OutcomeUnknown with the claim kept, though its
// attempt was decided on before the cut was known.
func TestHedge_renewalCutIsUnknownAsInDo(t *testing.T) {
	for _, hedge := range []bool{false, true} {
		t.Run(map[bool]string{false: "Do", true: "Hedge"}[hedge], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newFaulty()
				r, err := retry.New(retry.WithHedge(&retry.HedgeOptions{Delay: time.Hour}), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}),
					retry.WithMaxAttempts(2),
					retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", Lease: time.Second}))
				require.NoError(t, err)
				var calls atomic.Int32
				fn := func(ctx context.Context) error {
					calls.Add(1)
					store.set(func(f *faultyStore) { f.renewErr = errors.New("connection reset") })
					<-ctx.Done()
					return errors.New("the reply never came")
				}
				if hedge {
					err = r.Hedge(context.Background(), fn)
				} else {
					err = r.Do(context.Background(), fn)
				}
				var e *retry.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, retry.OutcomeUnknown, e.Outcome, "%v", err)
				assert.ErrorIs(t, err, retry.ErrOutcomeUnknown)
				assert.Equal(t, int32(1), calls.Load())
				assert.Equal(t, 0, store.counts()[3], "the claim is not released")
			})
		})
	}
}

// recBudget records what Attempted hears and allows every retry.
type recBudget struct {
	mu    sync.Mutex
	heard []string
}

func (b *recBudget) Attempted(n int, failed, throttled bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.heard = append(b.heard, map[bool]string{false: "ok", true: "failed"}[failed]+"#"+string(rune('0'+n)))
}
func (b *recBudget) Retry(time.Duration) error { return nil }
func (b *recBudget) Waited()                   {}

// The budget hears nothing of an attempt whose fn panicked, a hedge's
// too.
func TestHedge_panickedHedgeIsNotToldToTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &recBudget{}
		r := hedged(t, retry.WithOverload(&retry.OverloadOptions{Budget: b}))
		var n atomic.Int32
		func() {
			defer func() { require.Equal(t, "hedge boom", recover()) }()
			_ = r.Hedge(t.Context(), func(ctx context.Context) error {
				if n.Add(1) == 1 {
					<-ctx.Done()
					return ctx.Err()
				}
				panic("hedge boom")
			})
		}()
		b.mu.Lock()
		defer b.mu.Unlock()
		assert.NotContains(t, b.heard, "failed#2", "a panicked attempt is not told to the budget")
	})
}

// panicOnHedgeStart panics in the OnAttemptStart of attempt 2.
type panicOnHedgeStart struct{ recordingObserver }

func (o *panicOnHedgeStart) OnAttemptStart(ctx context.Context, e retry.AttemptStart) {
	if e.Attempt == 2 {
		panic("observer boom")
	}
	o.recordingObserver.OnAttemptStart(ctx, e)
}

// A panic in a hook that runs on a hedge's goroutine (here the
// observer's OnAttemptStart; WithRetryIf, a breaker or a budget there do
// the same) reaches the caller, as it would on Do's path, and does not
// crash the process.
func TestHedge_panicInAHookOfAHedgeReachesTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := hedged(t, retry.WithObserver(&panicOnHedgeStart{}))
		defer synctest.Wait()
		assert.PanicsWithValue(t, "observer boom", func() {
			_ = r.Hedge(t.Context(), func(ctx context.Context) error {
				<-ctx.Done()
				return ctx.Err()
			})
		})
	})
}

// recordingObserver keeps what it hears; safe for concurrent use, as
// hedges tell it from their goroutines.
type recordingObserver struct {
	mu      sync.Mutex
	started []int
	ended   int
	calls   []retry.Done
}

func (o *recordingObserver) OnAttemptStart(_ context.Context, e retry.AttemptStart) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started = append(o.started, e.Attempt)
}

func (o *recordingObserver) OnAttemptEnd(context.Context, retry.AttemptEnd) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended++
}

func (o *recordingObserver) OnRetry(context.Context, retry.Scheduled) {}
func (o *recordingObserver) OnWaitEnd(context.Context, retry.WaitEnd) {}

func (o *recordingObserver) OnDone(_ context.Context, d retry.Done) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, d)
}

func (o *recordingObserver) done() []retry.Done {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]retry.Done(nil), o.calls...)
}

func (o *recordingObserver) startedAttempts() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int(nil), o.started...)
}

func (o *recordingObserver) startCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.started)
}

func (o *recordingObserver) endCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ended
}

// The observer hears a hedged attempt's end after idempotency's part, as
// for a plain attempt: a hedge's success whose outcome could not be
// recorded ends with that error, not with nil, whichever attempt won.
func TestHedge_observerHearsAnUnrecordedSuccessAsAFailure(t *testing.T) {
	for name, winner := range map[string]int32{"the first attempt wins": 1, "a hedge wins": 2} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newFaulty()
				store.completeErr = errors.New("store down")
				rec := &recorder{}
				r := hedged(t, retry.WithIdempotency(store, nil), retry.WithObserver(rec), retry.WithMaxAttempts(2))
				ctx := retry.ContextWithIdempotencyKey(t.Context(), "order-1")
				var a attempts
				_, err := retry.HedgeValue(ctx, r, func(ctx context.Context) (int32, error) {
					k := a.next()
					if k != winner {
						return 0, a.ended(ctx, k)
					}
					time.Sleep(20 * time.Millisecond) // past the delay: the hedge starts
					return k, nil
				})
				require.Error(t, err, "the outcome was not recorded")
				synctest.Wait()
				rec.mu.Lock()
				defer rec.mu.Unlock()
				require.Len(t, rec.ends, 2)
				byAttempt := map[int]error{}
				for _, e := range rec.ends {
					byAttempt[e.Attempt] = e.Err
				}
				require.Contains(t, byAttempt, int(winner))
				assert.Error(t, byAttempt[int(winner)], "the winner's end carries the recording's failure")
				assert.ErrorIs(t, byAttempt[3-int(winner)], context.Canceled, "the loser was cancelled")
			})
		})
	}
}

// A dead letter of a hedged call labels each turn's failure with the
// number of the attempt that failed, not the turn's highest.
func TestHedge_deadLetterLabelsTheFailingAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := deadletter.NewMemorySink()
		r := hedged(t, retry.WithDeadLetter(sink, nil), retry.WithMaxAttempts(2), retry.WithName("read"))
		var a attempts
		err := r.Hedge(t.Context(), func(ctx context.Context) error {
			k := a.next()
			d := map[int32]time.Duration{1: 15 * time.Millisecond, 2: 2 * time.Millisecond}[k]
			time.Sleep(d)
			return fmt.Errorf("attempt %d: unavailable", k)
		})
		require.Error(t, err)
		letters := sink.Records()
		require.Len(t, letters, 1)
		require.NotEmpty(t, letters[0].Errors)
		for _, e := range letters[0].Errors {
			assert.Equal(t, fmt.Sprintf("attempt %d: unavailable", e.Attempt), e.Error)
		}
	})
}

// No hedge outlives its call blocked: with many Ps (the fault was seen
// once in 30 runs on 16 cores, never on 2), calls whose attempts all hang
// until the deadline leave no goroutine of theirs behind, counted in the
// bubble after each call, where nothing outside it can add one.
func TestHedge_noGoroutineOutlivesItsCallAtHighGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16))
	synctest.Test(t, func(t *testing.T) {
		r := hedged(t, retry.WithMaxAttempts(3))
		before := bubbleGoroutines(t)
		for i := range 300 {
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			_, err := retry.HedgeValue(ctx, r, func(ctx context.Context) (int, error) {
				<-ctx.Done()
				return 0, ctx.Err()
			})
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			synctest.Wait()
			require.Equal(t, before, bubbleGoroutines(t), "goroutines in the bubble after call %d", i)
		}
	})
}

// hookLog records, in order, what a breaker, a budget, an observer and a
// store hear of a call's attempts, and what fn does.
type hookLog struct {
	idempotency.Store
	mu     sync.Mutex
	events []string
}

func (l *hookLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf(format, args...))
}

func (l *hookLog) Allow() (func(error), error) {
	l.add("allow")
	return func(err error) {
		switch {
		case err == nil:
			l.add("done:ok")
		case errors.Is(err, overload.ErrNotCounted):
			l.add("done:not-counted")
		default:
			l.add("done:failed")
		}
	}, nil
}
func (l *hookLog) Attempted(n int, failed, _ bool) { l.add("attempted:%d:%v", n, failed) }
func (l *hookLog) Retry(time.Duration) error       { l.add("retry"); return nil }
func (l *hookLog) Waited()                         { l.add("waited") }
func (l *hookLog) OnAttemptStart(_ context.Context, e retry.AttemptStart) {
	l.add("start:%d", e.Attempt)
}
func (l *hookLog) OnAttemptEnd(_ context.Context, e retry.AttemptEnd) { l.add("end:%d", e.Attempt) }
func (l *hookLog) OnRetry(context.Context, retry.Scheduled)           {}
func (l *hookLog) OnWaitEnd(context.Context, retry.WaitEnd)           {}
func (l *hookLog) OnDone(context.Context, retry.Done)                 {}
func (l *hookLog) Complete(ctx context.Context, key, token string, out idempotency.StoredOutcome, retention time.Duration) error {
	l.add("complete")
	return l.Store.Complete(ctx, key, token, out, retention)
}

// without returns events less those in drop, each dropped once.
func without(events []string, drop ...string) []string {
	var out []string
	for _, e := range events {
		if i := slices.Index(drop, e); i >= 0 {
			drop = slices.Delete(drop, i, i+1)
			continue
		}
		out = append(out, e)
	}
	return out
}

// A hedge runs the loop's attempt: the same hooks, in the same order, as
// the loop's second attempt, with a breaker, a budget, an observer and an
// idempotency store, the winner's end after the outcome is recorded.
func TestHedge_attemptsRunTheLoopsHooksInItsOrder(t *testing.T) {
	opts := func(l *hookLog) []retry.Option {
		return []retry.Option{retry.WithOverload(&retry.OverloadOptions{Breaker: l, Budget: l}), retry.WithObserver(l),
			retry.WithIdempotency(l, &retry.IdempotencyOptions{Key: "order-1"}), retry.WithMaxAttempts(2),
			retry.WithBackoff(retry.Constant(5 * time.Millisecond)), retry.WithJitter(retry.NoJitter)}
	}
	// The loop: attempt 1 fails, attempt 2 succeeds after a wait.
	var plain []string
	synctest.Test(t, func(t *testing.T) {
		l := &hookLog{Store: memstore.New(nil)}
		r := mustNew(t, opts(l)...)
		k := 0
		require.NoError(t, r.Do(t.Context(), func(context.Context) error {
			k++
			l.add("fn:%d", k)
			if k == 1 {
				return errTransient
			}
			return nil
		}))
		plain = l.events
	})
	// A hedged call: attempt 1 hangs until the hedge, attempt 2, wins.
	var hedgedEvents []string
	synctest.Test(t, func(t *testing.T) {
		l := &hookLog{Store: memstore.New(nil)}
		r := mustNew(t, append(opts(l), retry.WithHedge(&retry.HedgeOptions{Delay: 10 * time.Millisecond}))...)
		var a attempts
		require.NoError(t, r.Hedge(t.Context(), func(ctx context.Context) error {
			k := a.next()
			l.add("fn:%d", k)
			if k == 1 {
				<-ctx.Done()
				time.Sleep(time.Millisecond) // its end comes after the hedge's
				l.add("fn:1:returned")
				return ctx.Err()
			}
			return nil
		}))
		hedgedEvents = l.events
	})
	assert.Equal(t, []string{"allow", "start:1", "fn:1", "end:1", "done:failed", "attempted:1:true",
		"retry", "waited", "allow", "start:2", "fn:2", "done:ok", "attempted:2:false", "complete", "end:2"}, plain)
	assert.Equal(t, []string{"allow", "start:1", "fn:1",
		"retry", "allow", "start:2", "fn:2", "done:ok", "attempted:2:false",
		"fn:1:returned", "end:1", "done:not-counted", "complete", "end:2"}, hedgedEvents)
	// Attempt 2's hooks, the hedge's and the loop's, without attempt 1's
	// and the loop's wait: the same, in the same order.
	second := without(plain, "allow", "start:1", "fn:1", "end:1", "done:failed", "attempted:1:true", "waited")
	hedge := without(hedgedEvents, "allow", "start:1", "fn:1", "fn:1:returned", "done:not-counted", "end:1")
	assert.Equal(t, second, hedge)
}

// A call answered within the delay makes only the round's context and
// its timer (3 allocations): its state and its round come from the
// Retrier's pool, with the function the timer calls, and Hedge's fn is
// not wrapped on the heap.
func TestHedge_answerWithinTheDelayMakesOnlyItsContextAndTimer(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates; run without -race")
	}
	r := hedged(t)
	ctx := context.Background()
	value := func(context.Context) (int, error) { return 1, nil }
	assert.Equal(t, 3.0, testing.AllocsPerRun(1000, func() { sink = r.Hedge(ctx, succeed) }), "Hedge")
	assert.Equal(t, 3.0, testing.AllocsPerRun(1000, func() { _, sink = retry.HedgeValue(ctx, r, value) }), "HedgeValue")
}

// The entry point arms the timer before the first attempt's hooks: one
// that held it past the delay (here an observer that takes 10ms) does not
// bring the hedge forward, which starts a whole delay after the first
// attempt began.
func TestHedge_delayRunsFromTheFirstAttemptsStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &slowFirstStart{}
		starts := hedgedStarts(t, hedged(t, retry.WithObserver(obs)))
		assert.Equal(t, []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}, starts)
		assert.Equal(t, []int{1, 2}, obs.startedAttempts())
	})
}

// hedgedStarts makes a call on r whose first attempt answers only once
// cancelled and whose hedge wins at once, and returns when each began,
// since the call did.
func hedgedStarts(t *testing.T, r *retry.Retrier) []time.Duration {
	t.Helper()
	var a attempts
	a.since = time.Now()
	v, err := retry.HedgeValue(t.Context(), r, func(ctx context.Context) (int32, error) {
		if k := a.next(); k == 1 {
			return 0, a.ended(ctx, k)
		}
		return 2, nil
	})
	require.NoError(t, err)
	assert.EqualValues(t, 2, v)
	return a.startedAt()
}

// slowFirstStart takes 10ms to hear that attempt 1 starts.
type slowFirstStart struct{ recordingObserver }

func (o *slowFirstStart) OnAttemptStart(ctx context.Context, e retry.AttemptStart) {
	if e.Attempt == 1 {
		time.Sleep(10 * time.Millisecond)
	}
	o.recordingObserver.OnAttemptStart(ctx, e)
}

// A first attempt that waits for a limit's permit has its hedge a delay
// after it began, not after the call did.
func TestHedge_attemptHeldByALimitHedgesAfterItBegan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		starts := hedgedStarts(t, hedged(t, retry.WithOverload(&retry.OverloadOptions{NoBudget: true, Limit: slowFirstPermit{}})))
		assert.Equal(t, []time.Duration{30 * time.Millisecond, 40 * time.Millisecond}, starts)
	})
}

// slowFirstPermit is a Limit that gives a call's first attempt its permit
// after 30ms, and the others at once.
type slowFirstPermit struct{}

func (slowFirstPermit) Acquire(_ context.Context, a overload.Attempt) error {
	if a.Kind == overload.FirstAttempt {
		time.Sleep(30 * time.Millisecond)
	}
	return nil
}
func (slowFirstPermit) Release(overload.Result, time.Duration) {}

// A round whose hedges ran is not reused: the next round, after the
// loop's wait, hedges again on a round of its own.
func TestHedge_roundAfterOneThatHedgedHedgesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := hedged(t, retry.WithMaxAttempts(4), retry.WithBackoff(retry.Constant(50*time.Millisecond)),
			retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{Budget: &secondHedgeRefused{}}))
		var a attempts
		a.since = time.Now()
		v, err := retry.HedgeValue(t.Context(), r, func(ctx context.Context) (int32, error) {
			switch k := a.next(); k {
			case 1: // 0..15ms; its hedge, 2, fails at 12ms, and no other is let
				time.Sleep(15 * time.Millisecond)
				return 0, errors.New("unavailable")
			case 2:
				time.Sleep(2 * time.Millisecond)
				return 0, errors.New("unavailable")
			case 3: // after the wait, at 65ms
				return 0, a.ended(ctx, k)
			default:
				return k, nil
			}
		})
		require.NoError(t, err)
		assert.EqualValues(t, 4, v)
		assert.Equal(t, []time.Duration{0, 10 * time.Millisecond, 65 * time.Millisecond, 75 * time.Millisecond}, a.startedAt())
		assert.ErrorIs(t, a.cause(3), retry.ErrHedgeLost)
	})
}

// secondHedgeRefused is a budget that refuses the second hedge it is
// asked for (Retry(0)), and allows every other retry.
type secondHedgeRefused struct{ hedges atomic.Int32 }

func (b *secondHedgeRefused) Attempted(int, bool, bool) {}
func (b *secondHedgeRefused) Waited()                   {}
func (b *secondHedgeRefused) Retry(d time.Duration) error {
	if d == 0 && b.hedges.Add(1) == 2 {
		return overload.ErrBudgetExhausted
	}
	return nil
}

// Calls of values of other types share a Retrier's pool of calls: each
// gets its own kind back, or a new one.
func TestHedge_callsOfOtherTypesShareTheRetrier(t *testing.T) {
	r := hedged(t)
	for i := range 20 {
		n, err := retry.HedgeValue(t.Context(), r, func(context.Context) (int, error) { return i, nil })
		require.NoError(t, err)
		assert.Equal(t, i, n)
		s, err := retry.HedgeValue(t.Context(), r, func(context.Context) (string, error) { return fmt.Sprint(i), nil })
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(i), s)
		require.NoError(t, r.Hedge(t.Context(), succeed))
	}
}

// TestHedge_parkedCallKeepsTwoKBStacks: a hedged call parked with both
// attempts in flight keeps each of its two goroutines within its first
// 2 KB stack, as a hand-written hedge does: the entry point makes the
// round's context and timer high on the caller's stack, and the loop's
// state is on the heap. Measured over 2,000 calls, the stacks of such
// calls come to 2.7-3.3 KB a call; with the caller's goroutine grown to
// 4 KB (d7d9a52), to 5.1-5.5 KB. On the real clock: see
// TestDo_parkedCallKeepsTwoKBStack.
func TestHedge_parkedCallKeepsTwoKBStacks(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation changes the frames; run without -race")
	}
	const n = 2000
	r := mustNew(t, retry.WithHedge(&retry.HedgeOptions{Delay: time.Millisecond}), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}),
		retry.WithMaxAttempts(2))
	least := math.Inf(1)
	for range 3 { // the least of three keeps a busy machine's noise out, as the Do test does
		c := measureParkedHedges(t, n, func(ctx context.Context) error { return r.Hedge(ctx, blockedAttempt) })
		least = min(least, c.Stack)
	}
	t.Logf("least stack per parked call: %.0f B", least)
	assert.Less(t, least, 4096.0, "stack per parked call, bytes: two 2 KB stacks at most")
}
