package retry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/retrystats"
)

// panicJSON's MarshalJSON dereferences a nil pointer: the default codec
// panics after fn succeeded.
type panicJSON struct{ p *int }

func (b panicJSON) MarshalJSON() ([]byte, error) { return json.Marshal(*b.p) }

// A panic in the value's encoding comes after fn succeeded: the key must
// not be freed (the next call would repeat the work), and the observer
// must still hear the attempt and the call end.
func TestIdempotentEncodingPanicDoesNotFreeTheKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts retry.IdempotencyOptions
		fn   func(context.Context) (any, error)
	}{
		{"custom Marshal", retry.IdempotencyOptions{Key: "k",
			Marshal:   func(any) ([]byte, error) { panic("marshal boom") },
			Unmarshal: func([]byte, any) error { return nil }},
			func(context.Context) (any, error) { return 1, nil }},
		{"MarshalJSON", retry.IdempotencyOptions{Key: "k"},
			func(context.Context) (any, error) { return panicJSON{}, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newFaulty()
			stats := &retrystats.Stats{}
			r := mustNew(t, retry.WithIdempotency(store, &tc.opts), retry.WithObserver(stats))
			calls := 0
			fn := func(ctx context.Context) (any, error) { calls++; return tc.fn(ctx) }
			func() {
				defer func() { assert.NotNil(t, recover(), "the panic goes on") }()
				_, _ = retry.DoValueOn(context.Background(), r, fn)
			}()
			s := stats.Snapshot()
			assert.Zero(t, s.InFlight, "the observer heard the call end")
			assert.Equal(t, uint64(1), s.Permanent)
			assert.False(t, claimFree(t, store, "k"), "the key is not freed")

			_, err := retry.DoValueOn(context.Background(), mustNew(t, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"})), fn)
			require.Error(t, err)
			assert.ErrorIs(t, err, retry.ErrReplayed, "the key is completed as a permanent failure")
			assert.Contains(t, err.Error(), "fn succeeded but the idempotency codec panicked encoding its value")
			assert.Equal(t, 1, calls, "fn ran once")
		})
	}
}

// Recording a failure is one try, bounded by the context and StoreTimeout:
// only a success's record may outlast the context. When it fails, the
// claim is released rather than held to its lease.
func TestIdempotentFailureRecordIsOneTryAndThenReleases(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep bool
		fn   func(context.Context) error
	}{
		{"permanent", false, func(context.Context) error { return retry.Permanent(errors.New("card declined")) }},
		{"KeepFailures exhaustion", true, func(context.Context) error { return errors.New("transient") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newFaulty()
				store.set(func(f *faultyStore) { f.completeErr = errors.New("connection reset") })
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				start := time.Now()
				err := retry.Do(ctx, tc.fn, append([]retry.Option{retry.WithIdempotency(store,
					&retry.IdempotencyOptions{Key: "k", KeepFailures: tc.keep}), retry.WithMaxAttempts(2)}, noWait...)...)
				require.Error(t, err)
				assert.NotErrorIs(t, err, retry.ErrOutcomeNotRecorded)
				assert.Less(t, time.Since(start), time.Second, "the record did not outlast the context")
				assert.Equal(t, 1, store.counts()[2], "one try of Complete")
				assert.Equal(t, 1, store.counts()[3], "then the claim is released")
				assert.True(t, claimFree(t, store, "k"), "the key is free at once")
			})
		})
	}
}

// cancelOnLook cancels the caller during its nth Claim, which then fails
// with the context's error.
type cancelOnLook struct {
	retry.IdempotencyStore
	mu     sync.Mutex
	n, at  int
	cancel context.CancelFunc
}

func (s *cancelOnLook) Claim(ctx context.Context, key, fp string, lease time.Duration) (retry.Claim, error) {
	s.mu.Lock()
	s.n++
	hit := s.n == s.at
	s.mu.Unlock()
	if hit {
		s.cancel()
		<-ctx.Done()
		return retry.Claim{}, ctx.Err()
	}
	return s.IdempotencyStore.Claim(ctx, key, fp, lease)
}

// A cancel that lands during a waiter's look at a held key ends the call
// as one that waited for the holder: it matches ErrInProgress and is not
// dead-lettered, in wait mode and with FailWhileHeld.
func TestIdempotentCancelDuringALookAtAHeldKey(t *testing.T) {
	for _, failWhileHeld := range []bool{false, true} {
		t.Run(fmt.Sprint("FailWhileHeld=", failWhileHeld), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				store := &cancelOnLook{IdempotencyStore: memstore.New(nil), at: 3, cancel: cancel}
				release := make(chan struct{})
				holderDone := make(chan error)
				go func() {
					holderDone <- retry.Do(context.Background(), func(context.Context) error { <-release; return nil },
						retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
				}()
				synctest.Wait()
				sink := deadletter.NewMemorySink()
				err := retry.Do(ctx, func(context.Context) error { t.Error("fn ran"); return nil },
					retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", FailWhileHeld: failWhileHeld}),
					retry.WithBackoff(retry.Constant(time.Millisecond)), retry.WithJitter(retry.NoJitter),
					retry.WithDeadLetter(sink, &retry.DeadLetterOptions{On: []retry.Outcome{retry.OutcomeCanceled}}))
				require.Error(t, err)
				assert.ErrorIs(t, err, retry.ErrInProgress)
				assert.ErrorIs(t, err, context.Canceled)
				assert.Zero(t, sink.Len(), "not dead-lettered")
				close(release)
				require.NoError(t, <-holderDone)
			})
		})
	}
}

// A holder whose claim was taken over while it waited between attempts
// lost to the caller that took over and did the work: it is not
// dead-lettered.
func TestIdempotentLostLeaseIsNotDeadLettered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		sink := deadletter.NewMemorySink()
		opts := &retry.IdempotencyOptions{Key: "k", Lease: time.Second}
		holder := make(chan error)
		go func() {
			holder <- retry.Do(context.Background(), func(context.Context) error { return errors.New("transient") },
				retry.WithIdempotency(store, opts), retry.WithBackoff(retry.Constant(5*time.Second)),
				retry.WithJitter(retry.NoJitter), retry.WithDeadLetter(sink, nil))
		}()
		synctest.Wait()
		require.NoError(t, retry.Do(context.Background(), func(context.Context) error { return nil }, retry.WithIdempotency(store, opts)),
			"the waiter takes over after the lease and does the work")
		err := <-holder
		require.ErrorIs(t, err, retry.ErrLeaseLost)
		assert.Zero(t, sink.Len(), "not dead-lettered")
	})
}

// An outer Retrier whose fn returns an inner idempotent call's replayed
// failure does not dead-letter it, as the inner call made directly does
// not; a redrive's replay through an inner call is recorded anew.
func TestIdempotentReplayFromAnInnerDoIsNotDeadLettered(t *testing.T) {
	store := memstore.New(nil)
	inner := mustNew(t, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "inner"}))
	require.Error(t, inner.Do(context.Background(), func(context.Context) error { return retry.Permanent(errors.New("declined")) }))
	sink := deadletter.NewMemorySink()
	outer := mustNew(t, retry.WithDeadLetter(sink, nil))
	fn := func(ctx context.Context) error {
		return inner.Do(ctx, func(context.Context) error { t.Error("inner fn ran"); return nil })
	}
	err := outer.Do(context.Background(), fn)
	require.ErrorIs(t, err, retry.ErrReplayed)
	assert.Zero(t, sink.Len(), "not dead-lettered")

	redrive, err := outer.ForRedrive(retry.DeadLetter{ID: "dl-1", Name: "outer"}, sink)
	require.NoError(t, err)
	require.ErrorIs(t, redrive.Do(context.Background(), fn), retry.ErrReplayed)
	assert.Equal(t, 1, sink.Len(), "a redrive's replay is recorded anew")
}

// An idempotent call inside another's fn shares its context, and so the
// outer call's context key: an inner Retrier's own Key wins over it, and
// an inner call left with the key its enclosing call holds fails at once
// instead of waiting a lease for itself and taking the key over.
func TestIdempotentNestedCallsKeepTheirOwnKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		outer := mustNew(t, retry.WithIdempotency(store, nil))
		inner := mustNew(t, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "email:1"}))
		ctx := retry.ContextWithIdempotencyKey(context.Background(), "charge:1")
		innerCalls := 0
		charge := func(ctx context.Context) (string, error) {
			if _, err := retry.DoValueOn(ctx, inner, func(context.Context) (string, error) { innerCalls++; return "sent", nil }); err != nil {
				return "", err
			}
			return "receipt", nil
		}
		start := time.Now()
		v, err := retry.DoValueOn(ctx, outer, charge)
		require.NoError(t, err)
		assert.Equal(t, "receipt", v)
		assert.Zero(t, time.Since(start), "no wait for a lease")
		assert.Equal(t, 1, innerCalls)

		v, err = retry.DoValueOn(ctx, outer, func(context.Context) (string, error) { t.Error("ran again"); return "", nil })
		require.NoError(t, err)
		assert.Equal(t, "receipt", v, "the outer key keeps the outer call's value")
		v, err = retry.DoValueOn(context.Background(), inner, func(context.Context) (string, error) { t.Error("ran again"); return "", nil })
		require.NoError(t, err)
		assert.Equal(t, "sent", v, "the inner call used its own key")

		// An inner call with no key of its own would use the outer's.
		ctx = retry.ContextWithIdempotencyKey(context.Background(), "charge:2")
		err = outer.Do(ctx, func(ctx context.Context) error {
			return outer.Do(ctx, func(context.Context) error { t.Error("inner fn ran"); return nil })
		})
		require.ErrorIs(t, err, retry.ErrInvalidOption)
		assert.Contains(t, err.Error(), "enclosing idempotent call")
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retry.OutcomePermanent, e.Outcome, "the outer call does not retry it")
		assert.Equal(t, 1, e.Attempts)
		assert.Zero(t, time.Since(start), "no wait for a lease")
	})
}

// slowClaimReply gets the reply of each Claim 200ms after the store
// applied it.
type slowClaimReply struct{ retry.IdempotencyStore }

func (s slowClaimReply) Claim(ctx context.Context, key, fp string, lease time.Duration) (retry.Claim, error) {
	cl, err := s.IdempotencyStore.Claim(ctx, key, fp, lease)
	time.Sleep(200 * time.Millisecond)
	return cl, err
}

// slowReplies slows the replies of Renew as well as Claim.
type slowReplies struct{ retry.IdempotencyStore }

func (s slowReplies) Claim(ctx context.Context, key, fp string, lease time.Duration) (retry.Claim, error) {
	return slowClaimReply(s).Claim(ctx, key, fp, lease)
}

func (s slowReplies) Renew(ctx context.Context, key, token string, lease time.Duration) error {
	err := s.IdempotencyStore.Renew(ctx, key, token, lease)
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
		newR := func(s retry.IdempotencyStore) *retry.Retrier {
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
