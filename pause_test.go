package retry_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/overload"
)

var errTooMany = errors.New("429 Too Many Requests")

func newPauseOf(t *testing.T, o overload.PauseOptions) *overload.Pause {
	t.Helper()
	p, err := overload.NewPause(o)
	require.NoError(t, err)
	return p
}

// pausedRetrier is a Retrier with the pause p, no budget, and waits of
// 10 ms between attempts.
func pausedRetrier(t *testing.T, p *overload.Pause, opts ...retry.Option) *retry.Retrier {
	return mustNew(t, append([]retry.Option{retry.WithOverload(&retry.OverloadOptions{Pause: p, NoBudget: true}),
		retry.WithBackoff(retry.Constant(10 * time.Millisecond)), retry.WithJitter(retry.NoJitter)}, opts...)...)
}

// One call told to come back in 2 s holds every call's next attempt,
// first attempts too, until then, and lets them go spread over Spread,
// never before.
func TestPause_aServerDelayHoldsEveryCallsNextAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPauseOf(t, overload.PauseOptions{Spread: 100 * time.Millisecond})
		r := pausedRetrier(t, p)
		start := time.Now()
		var mu sync.Mutex
		var sent []time.Duration
		attempt := func(fail bool) error {
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, time.Since(start))
			if fail {
				return retry.After(errTooMany, 2*time.Second)
			}
			return nil
		}
		var wg sync.WaitGroup
		tries := 0
		wg.Go(func() {
			assert.NoError(t, r.Do(context.Background(), func(context.Context) error { tries++; return attempt(tries == 1) }))
		})
		for i := range 20 {
			wg.Go(func() {
				time.Sleep(time.Duration(100+50*i) * time.Millisecond)
				assert.NoError(t, r.Do(context.Background(), func(context.Context) error { return attempt(false) }))
			})
		}
		wg.Wait()
		require.Len(t, sent, 22)
		assert.Zero(t, sent[0])
		distinct := map[time.Duration]bool{}
		for _, at := range sent[1:] {
			assert.GreaterOrEqual(t, at, 2*time.Second, "never before the server's time")
			assert.Less(t, at, 2100*time.Millisecond, "within the spread")
			distinct[at] = true
		}
		assert.Greater(t, len(distinct), 15, "let go spread, not all at once")
		assert.False(t, p.Paused(), "over, and seen over")
	})
}

// A call whose deadline comes before the pause's end ends at once,
// refused, with its last attempt's error if it made one.
func TestPause_aDeadlineBeforeTheEndEndsTheCallAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPauseOf(t, overload.PauseOptions{})
		r := pausedRetrier(t, p)
		p.Extend(context.Background(), 10*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		calls := 0
		err := r.Do(ctx, func(context.Context) error { calls++; return nil })
		assert.Zero(t, time.Since(start))
		assert.Zero(t, calls)
		assert.ErrorIs(t, err, overload.ErrPaused)
		assert.Equal(t, overload.RefusedByPause, overload.RefuserOf(err))
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retry.OutcomeRefused, e.Outcome)
		assert.Zero(t, e.Attempts)
		assert.Nil(t, e.Last)
		d, server := r.Wait(1, 0, e.Cause, nil)
		assert.True(t, server, "the refusal carries the pause's rest, for a queue to snooze the work")
		assert.GreaterOrEqual(t, d, 10*time.Second)

		// Paused while it waited its backoff: its next wait is the
		// pause's rest, which outlasts the deadline, so it ends at once.
		p2 := newPauseOf(t, overload.PauseOptions{})
		r2 := pausedRetrier(t, p2)
		errDown := errors.New("503")
		err = r2.Do(ctx, func(context.Context) error {
			p2.Extend(context.Background(), 10*time.Second) // another call's 429
			return errDown
		})
		assert.Zero(t, time.Since(start))
		assert.ErrorIs(t, err, errDown)
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retry.OutcomeDeadline, e.Outcome)
		assert.Equal(t, 1, e.Attempts)
	})
}

// A pause a call meets between attempts holds it after its own wait.
func TestPause_heldAfterItsOwnWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPauseOf(t, overload.PauseOptions{Spread: time.Millisecond})
		r := pausedRetrier(t, p, retry.WithBackoff(retry.Constant(time.Second)))
		start := time.Now()
		var at []time.Duration
		err := r.Do(context.Background(), func(context.Context) error {
			at = append(at, time.Since(start))
			if len(at) == 1 {
				go func() { time.Sleep(500 * time.Millisecond); p.Extend(context.Background(), 3*time.Second) }()
				return errors.New("503")
			}
			return nil
		})
		require.NoError(t, err)
		require.Len(t, at, 2)
		assert.GreaterOrEqual(t, at[1], 3500*time.Millisecond)
		assert.Less(t, at[1], 3502*time.Millisecond)
	})
}

// A call with a hand-off hands a long pause to its queue, as it would a
// long wait.
func TestPause_aLongPauseIsHandedOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPauseOf(t, overload.PauseOptions{Max: time.Hour})
		q := &queue{}
		r := pausedRetrier(t, p, retry.WithName("job"), retry.WithHandOff(q, &retry.HandOffOptions{Threshold: time.Minute}))
		p.Extend(context.Background(), time.Hour)
		// A deadline before the pause's end: handed off all the same, as
		// a long wait is, since the call returns at once.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := r.Do(ctx, func(context.Context) error { t.Error("called while paused"); return nil })
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retry.OutcomeHandedOff, e.Outcome)
		w := q.waitings()
		require.Len(t, w, 1)
		assert.Zero(t, w[0].Attempts)
		assert.GreaterOrEqual(t, w[0].Wait, time.Hour)
	})
}

// No hedge goes to a downstream paused while the first attempt runs.
func TestPause_noHedgeWhilePaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPauseOf(t, overload.PauseOptions{})
		r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Pause: p, NoBudget: true}),
			retry.WithHedge(&retry.HedgeOptions{Delay: 10 * time.Millisecond}))
		var calls atomic.Int32
		err := r.Hedge(context.Background(), func(ctx context.Context) error {
			if calls.Add(1) == 1 {
				p.Extend(ctx, time.Second) // another call's 429
				time.Sleep(50 * time.Millisecond)
			}
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, int32(1), calls.Load())
	})
}

// A partitioned pause holds only the calls of its partition.
func TestPause_holdsOnlyItsPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPauseOf(t, overload.PauseOptions{Partitioned: true})
		r := pausedRetrier(t, p)
		a := overload.WithPartition(context.Background(), "tenant-a")
		b := overload.WithPartition(context.Background(), "tenant-b")
		tries := 0
		start := time.Now()
		require.NoError(t, r.Do(a, func(context.Context) error {
			if tries++; tries == 1 {
				return retry.After(errTooMany, time.Second)
			}
			return nil
		}))
		assert.GreaterOrEqual(t, time.Since(start), time.Second)
		p.Extend(a, time.Minute)
		mid := time.Now()
		require.NoError(t, r.Do(b, func(context.Context) error { return nil }))
		assert.Zero(t, time.Since(mid), "another partition is not held")
	})
}

// A rate's refusal ends the call, refused, before fn runs; a breaker
// that allowed the attempt hears it was not counted.
func TestRate_refusalEndsTheCall(t *testing.T) {
	rate, err := overload.NewRate(overload.RateOptions{PerSecond: 1, Burst: 1})
	require.NoError(t, err)
	r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Rate: rate, NoBudget: true}), retry.WithBackoff(retry.Constant(0)))
	require.NoError(t, r.Do(context.Background(), func(context.Context) error { return nil }))
	calls := 0
	err = r.Do(context.Background(), func(context.Context) error { calls++; return nil })
	assert.Zero(t, calls)
	assert.ErrorIs(t, err, overload.ErrRateLimited)
	assert.Equal(t, overload.RefusedByRate, overload.RefuserOf(err))
	var e *retry.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retry.OutcomeRefused, e.Outcome)
	assert.Zero(t, e.Attempts)

	// A retry refused: the call ends with its last error.
	rate2, err := overload.NewRate(overload.RateOptions{PerSecond: 1, Burst: 1})
	require.NoError(t, err)
	br := &countingBreaker{}
	r2 := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Rate: rate2, Breaker: br, NoBudget: true}), retry.WithBackoff(retry.Constant(0)))
	errDown := errors.New("503")
	err = r2.Do(context.Background(), func(context.Context) error { return errDown })
	assert.ErrorIs(t, err, overload.ErrRateLimited)
	assert.ErrorIs(t, err, errDown)
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 1, e.Attempts)
	assert.Equal(t, []string{"failed", "not counted"}, br.heard)
}

// countingBreaker allows every attempt and records how each ended.
type countingBreaker struct{ heard []string }

func (b *countingBreaker) Allow() (func(error), error) {
	return func(err error) {
		switch {
		case err == nil:
			b.heard = append(b.heard, "answered")
		case errors.Is(err, overload.ErrNotCounted):
			b.heard = append(b.heard, "not counted")
		default:
			b.heard = append(b.heard, "failed")
		}
	}, nil
}

func TestWithOverload_refusesANilRate(t *testing.T) {
	_, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Rate: (*overload.Rate)(nil)}))
	assert.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.ErrorContains(t, err, "Rate is (*overload.Rate)(nil)")
}

// An idempotent call is held before its claim is renewed, never through
// it: a hold longer than the lease lets another caller take the key
// over, and the held call then finds it taken rather than running the
// work a second time.
func TestPause_anIdempotentCallIsHeldBeforeItsClaimIsRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		idem := retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "charge-1", Lease: time.Second})
		p := newPauseOf(t, overload.PauseOptions{Spread: time.Millisecond})
		held := pausedRetrier(t, p, idem)
		free := mustNew(t, idem, retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		var runs atomic.Int32
		work := func(context.Context) error { runs.Add(1); return nil }
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(2 * time.Second) // the held call's lease is over
			assert.NoError(t, free.Do(context.Background(), work))
		})
		p.Extend(context.Background(), 5*time.Second)
		err := held.Do(context.Background(), work)
		wg.Wait()
		assert.Equal(t, int32(1), runs.Load(), "the work ran once")
		assert.Error(t, err, "the held call found its key taken over")
	})
}

// A Retrier's seeded source picks its calls' shares of the spread, so a
// seeded run holds them alike.
func TestPause_aSeededRetrierHoldsAlike(t *testing.T) {
	hold := func() (d time.Duration) {
		synctest.Test(t, func(t *testing.T) {
			p := newPauseOf(t, overload.PauseOptions{})
			r := pausedRetrier(t, p, retry.WithRandom(rand.NewPCG(1, 1)))
			p.Extend(context.Background(), 2*time.Second)
			start := time.Now()
			require.NoError(t, r.Do(context.Background(), func(context.Context) error { return nil }))
			d = time.Since(start)
		})
		return d
	}
	first := hold()
	assert.Equal(t, first, hold())
	assert.Greater(t, first, 2*time.Second)
}
