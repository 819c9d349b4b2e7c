package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/memstore"
)

// countingStore counts Renew calls; hangRenew makes every Renew wait for
// its context.
type countingStore struct {
	idempotency.Store
	renews    atomic.Int32
	hangRenew atomic.Bool
}

func (s *countingStore) Renew(ctx context.Context, key, token string, lease time.Duration) error {
	s.renews.Add(1)
	if s.hangRenew.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Store.Renew(ctx, key, token, lease)
}

// A panic in fn releases the claim and unwinds Do: nothing of the call
// may go on after that. The renewer's timer must stop with fn, or it
// renews a claim Do released (and keeps fn's context, a child of the
// caller's, alive until then).
func TestIdempotentPanicInFnStopsTheRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countingStore{Store: memstore.New(nil)}
		func() {
			defer func() { require.Equal(t, "boom", recover()) }()
			_ = retry.Do(context.Background(), func(context.Context) error { panic("boom") },
				retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", Lease: 3 * time.Second}))
		}()
		time.Sleep(10 * time.Second)
		assert.Zero(t, store.renews.Load(), "no renewal after Do unwound")
	})
}

// fn that returns before a renewal fails was not cut off: its outcome is
// its own. A permanent failure fn returned while a renewal was under way
// is stored and replayed as that failure, not as an unknown outcome.
func TestIdempotentRenewalFailingAfterFnReturnedDoesNotMakeItUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countingStore{Store: memstore.New(nil)}
		store.hangRenew.Store(true)
		errDeclined := errors.New("card declined")
		opts := []retry.Option{retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", Lease: 3 * time.Second})}
		err := retry.Do(context.Background(), func(ctx context.Context) error {
			time.Sleep(1500 * time.Millisecond) // the renewal at 1s hangs until 2.7s
			require.NoError(t, ctx.Err(), "fn is not cut off while it runs")
			return retry.Permanent(errDeclined)
		}, opts...)
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retry.OutcomePermanent, e.Outcome, "fn returned its answer before any cut")
		assert.NotErrorIs(t, err, retry.ErrOutcomeUnknown)
		store.hangRenew.Store(false)

		err = retry.Do(context.Background(), func(context.Context) error { return nil }, opts...)
		assert.ErrorIs(t, err, retry.ErrReplayed)
		assert.NotErrorIs(t, err, retry.ErrOutcomeUnknown, "the failure fn returned is what is replayed")
		assert.ErrorContains(t, err, "card declined")
	})
}

func TestIdempotentRenewFailureFailsClosed(t *testing.T) {
	store := newFaulty()
	store.set(func(f *faultyStore) { f.renewErr = errors.New("i/o timeout") })
	calls := 0
	err := retry.Do(context.Background(), func(context.Context) error { calls++; return errors.New("503") },
		append([]retry.Option{retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"})}, noWait...)...)
	var e *retry.Error
	require.ErrorAs(t, err, &e)
	assert.ErrorIs(t, err, retry.ErrIdempotencyUnavailable)
	assert.Equal(t, retry.OutcomePermanent, e.Outcome)
	assert.Equal(t, 1, calls)
	assert.Equal(t, [4]int{1, 1, 0, 1}, store.counts(), "the claim is released")
}

func TestIdempotentFailOpenKeepsGoingWhenRenewFails(t *testing.T) {
	store := newFaulty()
	store.set(func(f *faultyStore) { f.renewErr = errors.New("down") })
	calls := 0
	err := retry.Do(context.Background(), func(context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("503")
		}
		return nil
	}, append([]retry.Option{retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", FailOpen: true})}, noWait...)...)
	require.NoError(t, err)
	assert.Equal(t, 3, calls)
	assert.Equal(t, [4]int{1, 2, 1, 0}, store.counts(), "the outcome is still stored under the claim")
}

// A claim that cannot be renewed while fn runs cuts fn off before its
// lease could run out: fn's context ends with the renewal's failure as its
// cause, the call's outcome is unknown (fn ran: not
// ErrIdempotencyUnavailable, which says it did not), and the key is not
// released. Fail-open lets fn run on instead.
func TestIdempotentFailedRenewalCutsFnBeforeTheLeaseEnds(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		t.Run(fmt.Sprint("failOpen=", failOpen), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newFaulty()
				var cause error
				var ran time.Duration
				start := time.Now()
				err := retry.Do(context.Background(), func(ctx context.Context) error {
					store.set(func(f *faultyStore) { f.renewErr = errors.New("connection reset") })
					select {
					case <-ctx.Done():
						cause = context.Cause(ctx)
					case <-time.After(5 * time.Second):
					}
					ran = time.Since(start)
					return errors.New("the reply never came")
				}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", Lease: time.Second, FailOpen: failOpen}), retry.WithMaxAttempts(1))
				if failOpen {
					assert.Equal(t, 5*time.Second, ran, "fail-open: fn runs on unprotected")
					assert.NoError(t, cause)
					return
				}
				assert.Less(t, ran, time.Second, "cut before the lease could run out")
				require.Error(t, cause)
				assert.Contains(t, cause.Error(), "could not be renewed")
				var e *retry.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, retry.OutcomeUnknown, e.Outcome)
				assert.ErrorIs(t, err, retry.ErrOutcomeUnknown)
				assert.NotErrorIs(t, err, retry.ErrIdempotencyUnavailable)
				assert.Equal(t, 0, store.counts()[3], "the claim is not released")
			})
		})
	}
}

// renewDown accepts the claim, then fails every renewal.
type renewDown struct{ idempotency.Store }

func (renewDown) Renew(context.Context, string, string, time.Duration) error {
	return errors.New("store down")
}

// With FailOpen, an attempt after a failed Renew runs unprotected: it gets
// its whole attempt timeout, not a context cut at the end of a lease the
// call may no longer hold.
func TestIdempotent_failOpenAfterAFailedRenewKeepsTheAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := mustNew(t,
			retry.WithIdempotency(renewDown{memstore.New(nil)}, &retry.IdempotencyOptions{Key: "k", Lease: 3 * time.Second, FailOpen: true}),
			retry.WithAttemptTimeout(time.Second), retry.WithMaxAttempts(3),
			retry.WithBackoff(retry.Constant(1500*time.Millisecond)), retry.WithJitter(retry.NoJitter))
		var mu sync.Mutex
		var left []time.Duration
		err := r.Do(context.Background(), func(ctx context.Context) error {
			d, ok := ctx.Deadline()
			require.True(t, ok)
			mu.Lock()
			left = append(left, time.Until(d))
			n := len(left)
			mu.Unlock()
			if n == 1 {
				time.Sleep(900 * time.Millisecond)
			}
			return errTransient
		})
		require.ErrorIs(t, err, errTransient)
		assert.Equal(t, []time.Duration{time.Second, time.Second, time.Second}, left)
	})
}

// slowClaimReply gets the reply of each Claim 200ms after the store
// applied it.
type slowClaimReply struct{ idempotency.Store }

func (s slowClaimReply) Claim(ctx context.Context, key, fp string, lease time.Duration) (idempotency.Claim, error) {
	cl, err := s.Store.Claim(ctx, key, fp, lease)
	time.Sleep(200 * time.Millisecond)
	return cl, err
}

// slowReplies slows the replies of Renew as well as Claim.
type slowReplies struct{ idempotency.Store }

func (s slowReplies) Claim(ctx context.Context, key, fp string, lease time.Duration) (idempotency.Claim, error) {
	return slowClaimReply(s).Claim(ctx, key, fp, lease)
}

func (s slowReplies) Renew(ctx context.Context, key, token string, lease time.Duration) error {
	err := s.Store.Renew(ctx, key, token, lease)
	time.Sleep(200 * time.Millisecond)
	return err
}

// The store's reply time counts against the lease: with Lease just above
// WithAttemptTimeout and a slow Claim reply, Do renews the claim before
// the first attempt, so that fn cannot still be running when the lease
// ends and another caller runs it too; and the claim is renewed while the
// attempt runs.
func TestIdempotentSlowClaimReplyDoesNotEatTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New(nil)
		newR := func(s idempotency.Store) *retry.Retrier {
			return mustNew(t, retry.WithIdempotency(s, &retry.IdempotencyOptions{Key: "k", Lease: 1100 * time.Millisecond}),
				retry.WithAttemptTimeout(time.Second), retry.WithBackoff(retry.Constant(10*time.Millisecond)), retry.WithJitter(retry.NoJitter))
		}
		var runs atomic.Int32
		var deadlines []time.Duration
		var mu sync.Mutex
		fn := func(ctx context.Context) error {
			runs.Add(1)
			d, _ := ctx.Deadline()
			mu.Lock()
			deadlines = append(deadlines, time.Until(d))
			mu.Unlock()
			select {
			case <-time.After(950 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		holder := make(chan error)
		go func() { holder <- newR(slowClaimReply{mem}).Do(context.Background(), fn) }()
		time.Sleep(10 * time.Millisecond)
		require.NoError(t, newR(mem).Do(context.Background(), fn), "the waiter replays the holder's success")
		require.NoError(t, <-holder)
		assert.Equal(t, int32(1), runs.Load(), "fn ran once")
		assert.Equal(t, []time.Duration{time.Second}, deadlines)

		// When the renewal's reply is slow too, the claim is renewed while
		// fn runs, so fn finishes within its attempt timeout, and a caller
		// that comes after the first lease would have ended finds the key
		// still held.
		deadlines = nil
		runs.Store(0)
		slow := memstore.New(nil)
		other := make(chan error)
		go func() {
			time.Sleep(1320 * time.Millisecond) // the claim renewed before the attempt, at 200ms, would end at 1300ms
			other <- mustNew(t, retry.WithIdempotency(slow, &retry.IdempotencyOptions{Key: "k", FailWhileHeld: true}), retry.WithMaxAttempts(1)).
				Do(context.Background(), func(context.Context) error { runs.Add(1); return nil })
		}()
		require.NoError(t, newR(slowReplies{slow}).Do(context.Background(), fn))
		assert.Equal(t, []time.Duration{time.Second}, deadlines, "the attempt timeout bounds the attempt, not a lease renewed meanwhile")
		assert.ErrorIs(t, <-other, retry.ErrInProgress, "the renewed claim still holds the key")
		assert.Equal(t, int32(1), runs.Load(), "only the holder ran fn")
	})
}

// The calls of one Retrier share its renewals' timer: each claim is still
// renewed every third of its lease while its fn runs, none is cut, and
// nothing is renewed once the calls are over.
func TestIdempotentCallsOfOneRetrierShareTheRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countingStore{Store: memstore.New(nil)}
		r, err := retry.New(retry.WithIdempotency(store, &retry.IdempotencyOptions{Lease: 3 * time.Second}))
		require.NoError(t, err)
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				ctx := retry.ContextWithIdempotencyKey(context.Background(), fmt.Sprint("k", i))
				err := r.Do(ctx, func(ctx context.Context) error {
					time.Sleep(time.Duration(i+1)*5*time.Second - time.Millisecond)
					return ctx.Err()
				})
				assert.NoError(t, err, "call %d", i)
			})
		}
		wg.Wait()
		// Renewals at 1s, 2s, ... before each fn's end at 5s, 10s, 15s.
		assert.Equal(t, int32(4+9+14), store.renews.Load())
		time.Sleep(time.Minute)
		assert.Equal(t, int32(4+9+14), store.renews.Load(), "renewed after the calls")
	})
}

// A lease and a retention of math.MaxInt64 ("forever", which
// IdempotencyOptions allows) never end: not on the real clock, and not in
// a synctest bubble, whose readings are far below 0. Adding such a lease
// to a reading must saturate, or the lease ends before it began and the
// outcome is not recorded.
func TestIdempotentForeverLeaseNeverEnds(t *testing.T) {
	const forever = time.Duration(math.MaxInt64)
	run := func(t *testing.T, hold time.Duration) {
		store := &countingStore{Store: memstore.New(nil)}
		r, err := retry.New(retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", Lease: forever, Retention: forever}))
		require.NoError(t, err)
		runs := 0
		for range 2 {
			require.NoError(t, r.Do(context.Background(), func(ctx context.Context) error {
				runs++
				time.Sleep(hold)
				return ctx.Err()
			}))
		}
		assert.Equal(t, 1, runs, "the second call replays the first's success")
		assert.Zero(t, store.renews.Load(), "a lease of centuries is renewed a third of it later")
	}
	t.Run("real clock", func(t *testing.T) { run(t, 0) })
	t.Run("synctest", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { run(t, time.Hour) })
	})
}
