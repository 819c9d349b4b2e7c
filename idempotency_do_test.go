package retry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/retrystats"
	"github.com/steadfast-go/retry/storetest"
)

// Claim: one caller at a time runs fn for a key; the others wait for its
// outcome, retry ErrInProgress, or fail; a store that fails fails the
// call closed unless FailOpen.

func TestIdempotentAttemptsShareOneClaim(t *testing.T) {
	store := newFaulty()
	calls := 0
	v, err := retry.DoValue(context.Background(), func(context.Context) (int, error) {
		calls++
		if calls < 3 {
			return 0, errors.New("flaky")
		}
		return 42, nil
	}, append([]retry.Option{retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"})}, noWait...)...)
	require.NoError(t, err)
	assert.Equal(t, 42, v)
	assert.Equal(t, [4]int{1, 2, 1, 0}, store.counts(), "one claim, a renewal before each later attempt, one completion")
	assert.Equal(t, []byte("42"), store.lastRecord.Value)
}

func TestIdempotentExhaustionReleasesTheClaim(t *testing.T) {
	store := newFaulty()
	calls := 0
	fn := func(context.Context) error { calls++; return errors.New("503") }
	opts := append([]retry.Option{retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}), retry.WithMaxAttempts(2)}, noWait...)

	err := retry.Do(context.Background(), fn, opts...)
	var e *retry.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retry.OutcomeExhausted, e.Outcome)
	assert.Equal(t, 2, e.Attempts)
	assert.Equal(t, [4]int{1, 1, 0, 1}, store.counts())

	require.Error(t, retry.Do(context.Background(), fn, opts...))
	assert.Equal(t, 4, calls, "a later call runs again after a released failure")
}

// A call cancelled while fn runs does not know whether fn acted: the key
// is not released, and at most once (the default) the next call replays
// the unknown outcome instead of running fn again.
func TestIdempotentCancelledWorkIsNotReleased(t *testing.T) {
	store := newFaulty()
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := retry.Do(ctx, func(context.Context) error {
		calls++
		cancel()
		return context.Canceled
	}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, retry.ErrOutcomeUnknown)
	assert.False(t, claimFree(t, store, "k"), "a call cut while fn ran must not free the key")
	err = retry.Do(context.Background(), func(context.Context) error { calls++; return nil },
		retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
	assert.Equal(t, 1, calls, "the unknown outcome is replayed")
	require.ErrorIs(t, err, retry.ErrOutcomeUnknown)
	require.ErrorIs(t, err, retry.ErrReplayed)

	// fn's own context.Canceled (not Do's) is not a final outcome.
	err = retry.Do(context.Background(), func(context.Context) error {
		return context.Canceled
	}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k2"}))
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, retry.ErrOutcomeUnknown)
	assert.True(t, claimFree(t, store, "k2"))
}

func TestIdempotentKeyHeldByAnotherIsRetriedAsInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		release := make(chan struct{})
		go func() {
			_ = retry.Do(context.Background(), func(context.Context) error {
				<-release
				return nil
			}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
		}()
		synctest.Wait()

		calls := 0
		var obs recorder
		sink := deadletter.NewMemorySink()
		err := retry.Do(context.Background(), func(context.Context) error { calls++; return nil },
			retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", FailWhileHeld: true}), retry.WithMaxAttempts(3),
			retry.WithObserver(&obs), retry.WithDeadLetter(sink, nil),
			retry.WithRetryIf(func(error) bool { return false })) // ErrInProgress is retried anyway
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.ErrorIs(t, err, retry.ErrInProgress)
		assert.ErrorIs(t, err, retry.ErrExhausted)
		assert.Contains(t, err.Error(), "held by another caller", "the error says the call lost only to another holder")
		assert.Equal(t, 3, e.Attempts, "each look at a held key spends an attempt")
		assert.Equal(t, 0, calls)
		assert.Equal(t, 2, obs.count("retry"))
		assert.Zero(t, sink.Len(), "work held by another caller is not dead-lettered as failed")
		close(release)
	})
}

func TestIdempotentInProgressThenCompletedReplays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		go func() {
			_, _ = retry.DoValue(context.Background(), func(context.Context) (string, error) {
				time.Sleep(150 * time.Millisecond)
				return "from holder", nil
			}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
		}()
		synctest.Wait()

		v, err := retry.DoValue(context.Background(), func(context.Context) (string, error) {
			t.Error("fn called although the holder completed")
			return "", nil
		}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", FailWhileHeld: true}),
			retry.WithBackoff(retry.Constant(100*time.Millisecond)), retry.WithJitter(retry.NoJitter))
		require.NoError(t, err)
		assert.Equal(t, "from holder", v)
	})
}

func TestIdempotentWaitModeWaitsForTheHoldersOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		go func() {
			_, _ = retry.DoValue(context.Background(), func(context.Context) (string, error) {
				time.Sleep(time.Minute - time.Second/2) // between two polls
				return "from holder", nil
			}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", Lease: 2 * time.Minute}))
		}()
		synctest.Wait()

		var obs recorder
		start := time.Now()
		v, err := retry.DoValue(context.Background(), func(context.Context) (string, error) {
			t.Error("fn called although the holder completed")
			return "", nil
		}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}), retry.WithMaxAttempts(1),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter), retry.WithObserver(&obs))
		require.NoError(t, err)
		assert.Equal(t, "from holder", v)
		assert.Equal(t, time.Minute, time.Since(start), "polled every second, on the backoff schedule")
		assert.Equal(t, []retry.Done{{Outcome: retry.OutcomeSuccess, Elapsed: time.Minute}}, obs.dones())
	})
}

func TestIdempotentWaitModeRunsFnWhenTheHolderReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		go func() {
			_ = retry.Do(context.Background(), func(context.Context) error {
				time.Sleep(time.Second)
				return errors.New("transient")
			}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}), retry.WithMaxAttempts(1))
		}()
		synctest.Wait()

		calls := 0
		err := retry.Do(context.Background(), func(context.Context) error { calls++; return nil },
			retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
		require.NoError(t, err)
		assert.Equal(t, 1, calls)
	})
}

// claimCounter counts Claim calls and fails those past limit, so that a
// caller polling without any wait (which freezes the bubble's clock)
// ends with an error instead of hanging the test.
type claimCounter struct {
	idempotency.Store
	limit int64
	n     atomic.Int64
}

func (c *claimCounter) Claim(ctx context.Context, key, fp string, lease time.Duration) (idempotency.Claim, error) {
	if c.n.Add(1) > c.limit {
		return idempotency.Claim{}, errors.New("claimCounter: too many claims, polling in a busy loop")
	}
	return c.Store.Claim(ctx, key, fp, lease)
}

func TestIdempotentWaitModePollsAtMostEveryMillisecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New(nil)
		// Another caller holds the key until 100.5ms, between two looks.
		_, err := mem.Claim(context.Background(), "k", "", 100*time.Millisecond+500*time.Microsecond)
		require.NoError(t, err)
		store := &claimCounter{Store: mem, limit: 1000}

		start := time.Now()
		calls := 0
		err = retry.Do(context.Background(), func(context.Context) error { calls++; return nil },
			append([]retry.Option{retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"})}, noWait...)...)
		require.NoError(t, err)
		assert.Equal(t, 1, calls)
		// Constant(0) asks for no wait, yet looks stay 1ms apart: held
		// at 0, 1, ..., 100ms, acquired at 101ms.
		assert.Equal(t, int64(102), store.n.Load(), "claims")
		assert.Equal(t, 101*time.Millisecond, time.Since(start))
	})
}

func TestIdempotentCallTimesCountFromItsStart(t *testing.T) {
	// The look at the store and the wait for another holder come before
	// the attempts, and are part of the call: Done.Elapsed, the dead
	// letter's times and the time budget all count from Do's start.
	for _, tc := range []struct {
		name string
		fn   func(context.Context) error
	}{
		{"success", func(context.Context) error { return nil }},
		{"permanent", func(context.Context) error { return retry.Permanent(errors.New("declined")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memstore.New(nil)
				go func() {
					_ = retry.Do(context.Background(), func(context.Context) error {
						time.Sleep(1500 * time.Millisecond) // frees the key between two polls
						return errors.New("transient")
					}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}), retry.WithMaxAttempts(1))
				}()
				synctest.Wait()

				var obs recorder
				sink := deadletter.NewMemorySink()
				start := time.Now()
				err := retry.Do(context.Background(), tc.fn,
					retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}),
					retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter),
					retry.WithObserver(&obs), retry.WithDeadLetter(sink, nil), retry.WithMaxElapsed(time.Hour))
				require.Len(t, obs.dones(), 1)
				assert.Equal(t, 2*time.Second, obs.dones()[0].Elapsed, "polled at 1s (held) and 2s (free), then ran fn")
				if tc.name == "success" {
					require.NoError(t, err)
					assert.Zero(t, sink.Len())
					return
				}
				require.Error(t, err)
				recs := sink.Records()
				require.Len(t, recs, 1)
				assert.Equal(t, start, recs[0].FirstAttempt)
				assert.Equal(t, start.Add(2*time.Second), recs[0].GaveUp)
			})
		})
	}
}

func TestIdempotentWaitModeCountsTheWaitInTheTimeBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		go func() {
			_ = retry.Do(context.Background(), func(context.Context) error {
				time.Sleep(2500 * time.Millisecond)
				return errors.New("transient")
			}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}), retry.WithMaxAttempts(1))
		}()
		synctest.Wait()

		// Held at 0s, 1s, 2s; free at 3s, when fn fails. With 4s of
		// budget, the 1s wait that would follow ends at 4s: too late.
		start := time.Now()
		calls := 0
		err := retry.Do(context.Background(), func(context.Context) error { calls++; return errTransient },
			retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}), retry.WithMaxAttempts(math.MaxInt),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter), retry.WithMaxElapsed(4*time.Second))
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retry.OutcomeMaxElapsed, e.Outcome)
		assert.Equal(t, 1, calls)
		assert.Equal(t, 3*time.Second, time.Since(start))
	})
}

func TestIdempotentWaitModeRespectsTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		release := make(chan struct{})
		go func() {
			_ = retry.Do(context.Background(), func(context.Context) error { <-release; return nil },
				retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
		}()
		synctest.Wait()

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		// Looks at 0, 3, 6 and 9s; the next wait would end past the
		// deadline, so Do stops at 9s without sleeping toward it. (Any
		// wait ends by 10s in the bubble, so only the exact time and the
		// live context show that the deadline was read.)
		err := retry.Do(ctx, func(context.Context) error { return nil },
			retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}),
			retry.WithBackoff(retry.Constant(3*time.Second)), retry.WithJitter(retry.NoJitter))
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retry.OutcomeDeadline, e.Outcome)
		assert.ErrorIs(t, err, retry.ErrInProgress)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 9*time.Second, time.Since(start))
		assert.NoError(t, ctx.Err(), "returned before the deadline")

		// The time budget is honoured as well: looks at 0, 2 and 4s.
		start = time.Now()
		err = retry.Do(context.Background(), func(context.Context) error { return nil },
			retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}), retry.WithMaxElapsed(5*time.Second),
			retry.WithBackoff(retry.Constant(2*time.Second)), retry.WithJitter(retry.NoJitter))
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retry.OutcomeMaxElapsed, e.Outcome)
		assert.ErrorIs(t, err, retry.ErrInProgress)
		assert.Equal(t, 4*time.Second, time.Since(start))
		close(release)
	})
}

func TestIdempotentKeyReuseWithAnotherPayload(t *testing.T) {
	store := newFaulty()
	calls := 0
	fn := func(context.Context) (string, error) { calls++; return "paid", nil }
	key := retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"})

	_, err := retry.DoValue(context.Background(), fn, key, retry.WithPayload([]byte(`{"amount":10}`)))
	require.NoError(t, err)
	_, err = retry.DoValue(context.Background(), fn, key, retry.WithPayload([]byte(`{"amount":99}`)))
	assert.ErrorIs(t, err, retry.ErrKeyReuse)
	_, err = retry.DoValue(context.Background(), fn, key) // no payload is another payload
	assert.ErrorIs(t, err, retry.ErrKeyReuse)
	assert.Equal(t, 1, calls)

	v, err := retry.DoValue(context.Background(), fn, key, retry.WithPayload([]byte(`{"amount":10}`)))
	require.NoError(t, err)
	assert.Equal(t, "paid", v, "the stored result is unchanged")
	assert.Equal(t, 1, calls)
}

func TestIdempotentCallersWaitForTheHolderByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		sink := deadletter.NewMemorySink()
		go func() {
			_ = retry.Do(context.Background(), func(context.Context) error {
				time.Sleep(10 * time.Minute) // far longer than the attempts' backoff
				return nil
			}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", Lease: time.Hour}))
		}()
		synctest.Wait()
		calls := 0
		err := retry.Do(context.Background(), func(context.Context) error { calls++; return nil },
			retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}), retry.WithDeadLetter(sink, nil))
		require.NoError(t, err, "the holder's success is replayed")
		assert.Equal(t, 0, calls)

		// A caller whose deadline ends while it waits is not dead-lettered.
		holder := make(chan struct{})
		go func() {
			defer close(holder)
			_ = retry.Do(context.Background(), func(context.Context) error {
				time.Sleep(10 * time.Minute)
				return nil
			}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k2", Lease: time.Hour}))
		}()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = retry.Do(ctx, func(context.Context) error { calls++; return nil },
			retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k2"}), retry.WithDeadLetter(sink, &retry.DeadLetterOptions{On: []retry.Outcome{retry.OutcomeDeadline}}))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, retry.ErrInProgress, "the error says another caller holds the key")
		assert.Equal(t, 0, calls)
		assert.Zero(t, sink.Len())
		<-holder
	})
}

func TestIdempotentKeyReuseWhileHeld(t *testing.T) {
	store := memstore.New(nil)
	cl, err := store.Claim(context.Background(), "k", "another fingerprint", time.Minute)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, cl.Status)
	for _, wait := range []bool{false, true} {
		err = retry.Do(context.Background(), func(context.Context) error {
			t.Error("fn called on key reuse")
			return nil
		}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", FailWhileHeld: !(wait)}), retry.WithPayload([]byte("x")))
		assert.ErrorIs(t, err, retry.ErrKeyReuse)
	}
}

func TestIdempotentPanicReleasesTheClaim(t *testing.T) {
	store := newFaulty()
	func() {
		defer func() { assert.Equal(t, "boom", recover()) }()
		_ = retry.Do(context.Background(), func(context.Context) error { panic("boom") }, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
	}()
	assert.Equal(t, [4]int{1, 0, 0, 1}, store.counts())
	assert.True(t, claimFree(t, store, "k"), "the key is free at once after the panic")

	// A panic in what judges fn's error (WithRetryIf), after fn failed,
	// frees the key too: the work did not succeed.
	store = newFaulty()
	func() {
		defer func() { assert.Equal(t, "judge", recover()) }()
		_ = retry.Do(context.Background(), func(context.Context) error { return errTransient },
			retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}),
			retry.WithRetryIf(func(error) bool { panic("judge") }))
	}()
	assert.True(t, claimFree(t, store, "k"), "the key is free at once after a panic in WithRetryIf")
}

func TestIdempotentExactlyOnceUnderContention(t *testing.T) {
	// 64 callers x 200 keys, every key with its own side-effect counter.
	defer goleak.VerifyNone(t)
	store := memstore.New(nil)
	var effects sync.Map
	counter := func(key string) *atomic.Int32 {
		c, _ := effects.LoadOrStore(key, new(atomic.Int32))
		return c.(*atomic.Int32)
	}
	storetest.TestExactlyOnce(t, storetest.ExactlyOnce{
		Store: store,
		SideEffect: func(_ context.Context, key string) error {
			counter(key).Add(1)
			return nil
		},
		Count: func(_ context.Context, key string) (int, error) {
			return int(counter(key).Load()), nil
		},
	})
	assert.Equal(t, 200, store.Len(), "one record per key")
}

func TestIdempotentObserverSeesInProgressAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		go func() {
			_ = retry.Do(context.Background(), func(context.Context) error {
				time.Sleep(150 * time.Millisecond)
				return nil
			}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
		}()
		synctest.Wait()
		var obs recorder
		require.NoError(t, retry.Do(context.Background(), func(context.Context) error {
			t.Error("fn called although the holder completed")
			return nil
		}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", FailWhileHeld: true}), retry.WithObserver(&obs),
			retry.WithBackoff(retry.Constant(100*time.Millisecond)), retry.WithJitter(retry.NoJitter)))
		obs.mu.Lock()
		defer obs.mu.Unlock()
		assert.Equal(t, []string{"start", "end", "retry", "waitend", "start", "end", "retry", "waitend", "start", "end", "done"}, obs.events)
		assert.Equal(t, 3, obs.done[0].Attempts)
		assert.Equal(t, retry.OutcomeSuccess, obs.done[0].Outcome)
	})
}

// cancelOnLook cancels the caller during its nth Claim, which then fails
// with the context's error.
type cancelOnLook struct {
	idempotency.Store
	mu     sync.Mutex
	n, at  int
	cancel context.CancelFunc
}

func (s *cancelOnLook) Claim(ctx context.Context, key, fp string, lease time.Duration) (idempotency.Claim, error) {
	s.mu.Lock()
	s.n++
	hit := s.n == s.at
	s.mu.Unlock()
	if hit {
		s.cancel()
		<-ctx.Done()
		return idempotency.Claim{}, ctx.Err()
	}
	return s.Store.Claim(ctx, key, fp, lease)
}

// A cancel that lands during a waiter's look at a held key ends the call
// as one that waited for the holder: it matches ErrInProgress and is not
// dead-lettered, in wait mode and with FailWhileHeld.
func TestIdempotentCancelDuringALookAtAHeldKey(t *testing.T) {
	for _, failWhileHeld := range []bool{false, true} {
		t.Run(fmt.Sprint("FailWhileHeld=", failWhileHeld), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				store := &cancelOnLook{Store: memstore.New(nil), at: 3, cancel: cancel}
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

func TestIdempotentStoreFailureFailsClosed(t *testing.T) {
	boom := errors.New("connection refused")
	for name, set := range map[string]func(*faultyStore){
		"claim error":    func(f *faultyStore) { f.claimErr = boom },
		"unknown status": func(f *faultyStore) { f.claimStatus = 9 },
	} {
		t.Run(name, func(t *testing.T) {
			store := newFaulty()
			store.set(set)
			calls := 0
			var obs recorder
			err := retry.Do(context.Background(), func(context.Context) error { calls++; return nil },
				retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}), retry.WithObserver(&obs))
			require.ErrorIs(t, err, retry.ErrIdempotencyUnavailable)
			assert.Equal(t, 0, calls, "fn must not run when the store cannot say")
			assert.Contains(t, err.Error(), "claim")
			assert.NotContains(t, err.Error(), `"k"`, "keys stay out of error text")
			assert.Equal(t, 1, obs.count("done"))
		})
	}
}

func TestIdempotentHangingStoreTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaulty()
		store.set(func(f *faultyStore) { f.hang = true })
		start := time.Now()
		err := retry.Do(context.Background(), func(context.Context) error {
			t.Error("fn called although the store hung")
			return nil
		}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", StoreTimeout: 2 * time.Second}))
		require.ErrorIs(t, err, retry.ErrIdempotencyUnavailable)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 2*time.Second, time.Since(start))

		err = retry.Do(context.Background(), func(context.Context) error { return nil }, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
		require.ErrorIs(t, err, retry.ErrIdempotencyUnavailable)
		assert.Equal(t, 2*time.Second+(5*time.Second), time.Since(start))
	})
}

func TestIdempotentStoreTimeoutRunsOnTheRetriersClock(t *testing.T) {
	// Under synctest the real clock is fake; a mock clock that nobody
	// advances must keep the store call waiting, and advancing it by the
	// timeout must end it.
	synctest.Test(t, func(t *testing.T) {
		store := newFaulty()
		store.set(func(f *faultyStore) { f.hang = true })
		mock := clock.NewMock()
		done := make(chan error, 1)
		go func() {
			done <- retry.Do(context.Background(), func(context.Context) error { return nil },
				retry.WithClock(mock), retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", StoreTimeout: 2 * time.Second}))
		}()
		time.Sleep(time.Hour) // real (fake) time passes: the mock's does not
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Do returned %v before the mock clock moved", err)
		default:
		}
		mock.Add(2 * time.Second)
		err := <-done
		require.ErrorIs(t, err, retry.ErrIdempotencyUnavailable)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestIdempotentFailOpenRunsFn(t *testing.T) {
	store := newFaulty()
	store.set(func(f *faultyStore) { f.claimErr = errors.New("down") })
	calls := 0
	v, err := retry.DoValue(context.Background(), func(context.Context) (int, error) { calls++; return 7, nil },
		retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", FailOpen: true}))
	require.NoError(t, err)
	assert.Equal(t, 7, v)
	assert.Equal(t, 1, calls)
	assert.Equal(t, [4]int{1, 0, 0, 0}, store.counts())
}

func TestIdempotentWaitModeFailsClosedWhenTheStoreFailsWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaulty()
		_, err := store.Store.Claim(context.Background(), "k", "", time.Hour)
		require.NoError(t, err)
		go func() {
			time.Sleep(2500 * time.Millisecond) // between two looks
			store.set(func(f *faultyStore) { f.claimErr = errors.New("down") })
		}()
		err = retry.Do(context.Background(), func(context.Context) error {
			t.Error("fn called although the store failed")
			return nil
		}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter))
		require.ErrorIs(t, err, retry.ErrIdempotencyUnavailable)
		assert.Equal(t, 4, store.counts()[0], "looked at t=0,1,2,3s")
	})
}

// The same when the caller does not wait but spends attempts looking: a
// store failure at a later look fails closed too, permanent, fn not run.
func TestIdempotentFailWhileHeldFailsClosedWhenALaterLookFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaulty()
		_, err := store.Store.Claim(context.Background(), "k", "", time.Hour)
		require.NoError(t, err)
		go func() {
			time.Sleep(1500 * time.Millisecond) // after the second look
			store.set(func(f *faultyStore) { f.claimErr = errors.New("down") })
		}()
		err = retry.Do(context.Background(), func(context.Context) error {
			t.Error("fn called although the store failed")
			return nil
		}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", FailWhileHeld: true}),
			retry.WithMaxAttempts(10), retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter))
		require.ErrorIs(t, err, retry.ErrIdempotencyUnavailable)
		assert.True(t, retry.IsPermanent(err))
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retry.OutcomePermanent, e.Outcome)
		assert.Equal(t, 3, e.Attempts, "held at 0s and 1s, the store down at 2s")
		assert.Equal(t, 3, store.counts()[0])
	})
}

// Replay: an outcome recorded under a key is replayed, not run again, and
// an outcome that could not be recorded is never reported as plain success.

func TestIdempotentSuccessIsStoredAndReplayed(t *testing.T) {
	store := newFaulty()
	calls := 0
	fn := func(context.Context) (order, error) {
		calls++
		return order{ID: calls, Amount: 9.99, Tags: []string{"a", "b"}}, nil
	}
	opts := []retry.Option{retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "charge:1"})}

	v, err := retry.DoValue(context.Background(), fn, opts...)
	require.NoError(t, err)
	assert.Equal(t, order{ID: 1, Amount: 9.99, Tags: []string{"a", "b"}}, v)

	v, err = retry.DoValue(context.Background(), fn, opts...)
	require.NoError(t, err)
	assert.Equal(t, order{ID: 1, Amount: 9.99, Tags: []string{"a", "b"}}, v, "the first call's value is replayed")
	assert.Equal(t, 1, calls, "fn must not run for a completed key")

	err = retry.Do(context.Background(), func(context.Context) error { calls++; return nil }, opts...)
	require.NoError(t, err)
	assert.Equal(t, 1, calls)
	assert.Equal(t, [4]int{3, 0, 1, 0}, store.counts(), "claims, renews, completes, releases")
}

// recordingCodec checks that Unmarshal gets exactly what Marshal made.
type recordingCodec struct {
	mu                 sync.Mutex
	marshaled, decoded [][]byte
}

func (c *recordingCodec) Marshal(v any) ([]byte, error) {
	b := []byte(strings.ToUpper(v.(string)) + "\x00\xff")
	c.mu.Lock()
	c.marshaled = append(c.marshaled, b)
	c.mu.Unlock()
	return b, nil
}

func (c *recordingCodec) Unmarshal(data []byte, v any) error {
	c.mu.Lock()
	c.decoded = append(c.decoded, append([]byte(nil), data...))
	c.mu.Unlock()
	*v.(*string) = strings.ToLower(strings.TrimSuffix(string(data), "\x00\xff"))
	return nil
}

func TestIdempotentValueIsReplayedByteForByteThroughTheCodec(t *testing.T) {
	store := newFaulty()
	codec := &recordingCodec{}
	r, err := retry.New(retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", Marshal: codec.Marshal, Unmarshal: codec.Unmarshal}))
	require.NoError(t, err)
	fn := func(context.Context) (string, error) { return "receipt-7", nil }

	_, err = retry.DoValueOn(context.Background(), r, fn)
	require.NoError(t, err)
	v, err := retry.DoValueOn(context.Background(), r, func(context.Context) (string, error) {
		t.Error("fn called for a completed key")
		return "", nil
	})
	require.NoError(t, err)
	assert.Equal(t, "receipt-7", v)
	require.Len(t, codec.marshaled, 1)
	require.Len(t, codec.decoded, 1)
	assert.Equal(t, codec.marshaled[0], codec.decoded[0])
	assert.Equal(t, []byte("RECEIPT-7\x00\xff"), store.lastRecord.Value)
}

func TestIdempotentPermanentFailureIsStoredAndReplayedAsPermanent(t *testing.T) {
	store := newFaulty()
	opts := append([]retry.Option{retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"})}, noWait...)
	calls := 0
	fn := func(context.Context) error {
		calls++
		return retry.Permanent(errors.New("card declined"))
	}
	first := retry.Do(context.Background(), fn, opts...)
	require.Error(t, first)
	assert.Equal(t, idempotency.StoredOutcome{Permanent: true, Error: "card declined"}, store.lastRecord)

	err := retry.Do(context.Background(), fn, opts...)
	assert.Equal(t, 1, calls, "fn must not run for a completed key")
	var e *retry.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retry.OutcomePermanent, e.Outcome)
	assert.Equal(t, 0, e.Attempts)
	assert.True(t, retry.IsPermanent(e.Last), "the replayed failure is marked permanent")
	assert.ErrorIs(t, err, retry.ErrReplayed)
	assert.Equal(t, "card declined", e.Last.Error())
	assert.Contains(t, err.Error(), "card declined")

	// DoValue replays it too.
	_, err = retry.DoValue(context.Background(), func(context.Context) (int, error) { calls++; return 1, nil }, opts...)
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retry.OutcomePermanent, e.Outcome)
	assert.Equal(t, 1, calls)
}

func TestIdempotentKeepFailuresStoresExhaustion(t *testing.T) {
	store := newFaulty()
	calls := 0
	fn := func(context.Context) error { calls++; return errors.New("503 from upstream") }
	opts := append([]retry.Option{retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", KeepFailures: true}), retry.WithMaxAttempts(2)}, noWait...)

	require.Error(t, retry.Do(context.Background(), fn, opts...))
	err := retry.Do(context.Background(), fn, opts...)
	assert.Equal(t, 2, calls, "the stored exhaustion is replayed")
	var e *retry.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retry.OutcomePermanent, e.Outcome)
	assert.Equal(t, "503 from upstream", e.Last.Error())
}

func TestIdempotentKeepFailuresStoresMaxElapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaulty()
		calls := 0
		fn := func(context.Context) error { calls++; return errors.New("503 from upstream") }
		// The 1s wait after the first attempt would use up the 1s budget.
		opts := []retry.Option{retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", KeepFailures: true}),
			retry.WithMaxElapsed(time.Second), retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter)}

		var e *retry.Error
		require.ErrorAs(t, retry.Do(context.Background(), fn, opts...), &e)
		assert.Equal(t, retry.OutcomeMaxElapsed, e.Outcome)
		err := retry.Do(context.Background(), fn, opts...)
		assert.Equal(t, 1, calls, "the stored failure is replayed")
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retry.OutcomePermanent, e.Outcome)
		assert.Equal(t, "503 from upstream", e.Last.Error())
	})
}

func TestIdempotentRetentionExpiryRunsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		calls := 0
		fn := func(context.Context) (int, error) { calls++; return calls, nil }
		opts := []retry.Option{retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", Retention: time.Hour})}

		v, _ := retry.DoValue(context.Background(), fn, opts...)
		assert.Equal(t, 1, v)
		time.Sleep(time.Hour - time.Nanosecond)
		v, _ = retry.DoValue(context.Background(), fn, opts...)
		assert.Equal(t, 1, v, "replayed within retention")
		time.Sleep(time.Nanosecond)
		v, _ = retry.DoValue(context.Background(), fn, opts...)
		assert.Equal(t, 2, v, "runs again after retention")
		assert.Equal(t, 2, calls)
	})
}

func TestIdempotentCompleteIsRetriedOnTransientStoreErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaulty()
		store.set(func(f *faultyStore) { f.completeErr, f.completeFails = errors.New("connection reset"), 3 })
		calls := 0
		fn := func(context.Context) (int, error) { calls++; return 5, nil }
		opts := []retry.Option{retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"})}
		start := time.Now()
		v, err := retry.DoValue(context.Background(), fn, opts...)
		require.NoError(t, err, "the fourth try records the outcome")
		assert.Equal(t, 5, v)
		assert.Equal(t, [4]int{1, 3, 4, 0}, store.counts(), "claim, 3 renewals between 4 tries of Complete")
		assert.Equal(t, 70*time.Millisecond, time.Since(start), "10ms, 20ms and 40ms between the tries")

		v, err = retry.DoValue(context.Background(), fn, opts...)
		require.NoError(t, err)
		assert.Equal(t, 5, v)
		assert.Equal(t, 1, calls, "the recorded success is replayed")
	})
}

func TestIdempotentCompleteWhoseReplyWasLostIsFoundRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaulty()
		// The first Complete is stored but reports a timeout; the retry
		// is then refused (the key is no longer claimed).
		store.set(func(f *faultyStore) {
			f.completeErr, f.completeFails, f.completeLosesReply = context.DeadlineExceeded, 1, true
		})
		calls := 0
		fn := func(context.Context) error { calls++; return nil }
		require.NoError(t, retry.Do(context.Background(), fn, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"})),
			"the lookup after the refused retry finds this call's outcome")
		require.NoError(t, retry.Do(context.Background(), fn, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"})))
		assert.Equal(t, 1, calls)

		// The same with the first two lookups failing too: they are
		// retried until the lease bound.
		store = newFaulty()
		store.set(func(f *faultyStore) {
			f.completeErr, f.completeFails, f.completeLosesReply, f.thenFailClaims = context.DeadlineExceeded, 1, true, 2
		})
		require.NoError(t, retry.Do(context.Background(), fn, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"})))
		assert.Equal(t, 2, calls)
		assert.Equal(t, 4, store.counts()[0], "the claim, two failed lookups, the one that finds the outcome")
	})
}

func TestIdempotentOutcomeNotRecordedIsNotPlainSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaulty()
		store.set(func(f *faultyStore) { f.completeErr = errors.New("connection refused") })
		sink := deadletter.NewMemorySink()
		var obs recorder
		calls := 0
		fn := func(context.Context) (int, error) { calls++; return 5, nil }
		lease := 2 * time.Second
		opts := []retry.Option{retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "order-42", Lease: lease}),
			retry.WithDeadLetter(sink, nil), retry.WithObserver(&obs)}
		start := time.Now()
		v, err := retry.DoValue(context.Background(), fn, opts...)
		assert.Equal(t, 5, v, "DoValue still returns the value")
		require.ErrorIs(t, err, retry.ErrOutcomeNotRecorded)
		assert.NotErrorIs(t, err, retry.ErrIdempotencyUnavailable, "fn ran: the error must not read as 'fn did not run'")
		assert.ErrorContains(t, err, "connection refused", "the store's error is kept")
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retry.OutcomePermanent, e.Outcome)
		assert.Equal(t, 1, e.Attempts)
		assert.True(t, retry.IsPermanent(err), "an outer Do must not run the work again")
		assert.NotContains(t, err.Error(), "order-42")
		assert.Zero(t, sink.Len(), "work that succeeded is not dead-lettered")
		assert.Less(t, time.Since(start), lease-lease/10, "the tries end a tenth of a lease before it could run out")
		assert.GreaterOrEqual(t, time.Since(start), lease-time.Second-10*time.Millisecond, "and go on until the next backoff would pass it")
		assert.Equal(t, retry.OutcomePermanent, obs.done[0].Outcome)

		// The claim is not released: until its lease ends nobody runs
		// the work again.
		_, err = retry.DoValue(context.Background(), fn, append(opts, retry.WithMaxAttempts(1),
			retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "order-42", Lease: lease, FailWhileHeld: true}))...)
		require.ErrorIs(t, err, retry.ErrInProgress)
		assert.Equal(t, 1, calls)
	})
}

func TestIdempotentUnencodableValueIsNotRepeated(t *testing.T) {
	store := newFaulty()
	sink := deadletter.NewMemorySink()
	calls := 0
	fn := func(context.Context) (func(), error) { calls++; return func() {}, nil }
	v, err := retry.DoValue(context.Background(), fn, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "order-42"}), retry.WithDeadLetter(sink, nil))
	require.Error(t, err)
	assert.NotNil(t, v, "DoValue still returns the value")
	assert.Contains(t, err.Error(), "could not be encoded")
	assert.NotContains(t, err.Error(), "order-42")
	var e *retry.Error
	require.ErrorAs(t, err, &e, "every failure carries an *Error")
	assert.Equal(t, retry.OutcomePermanent, e.Outcome)
	assert.Equal(t, 1, e.Attempts)
	var unsupported *json.UnsupportedTypeError
	assert.ErrorAs(t, err, &unsupported, "the codec's error is reachable")
	assert.Zero(t, sink.Len(), "fn succeeded: not dead-lettered")
	_, err = retry.DoValue(context.Background(), fn, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "order-42"}))
	require.Error(t, err)
	assert.ErrorIs(t, err, retry.ErrReplayed)
	assert.Equal(t, 1, calls)
}

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

// Lease: a claim is held for its lease only; a caller that lost it stops,
// and a claim left behind is taken over once its lease ends.

// A claim whose lease runs out during a wait between attempts, and that
// another caller takes over, ends the call without calling fn again.
func TestIdempotentLostLeaseStopsWithoutCallingFn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		calls := 0
		done := make(chan error)
		go func() {
			done <- retry.Do(context.Background(), func(context.Context) error {
				calls++
				return errors.New("timeout")
			}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", Lease: time.Second}),
				retry.WithBackoff(retry.Constant(2*time.Second)), retry.WithJitter(retry.NoJitter)) // the wait outlives the 1s lease
		}()
		time.Sleep(1500 * time.Millisecond)
		require.NoError(t, retry.Do(context.Background(), func(context.Context) error { return nil },
			retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"})), "the expired lease is taken over")

		err := <-done
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.ErrorIs(t, err, idempotency.ErrLeaseLost)
		assert.Equal(t, retry.OutcomePermanent, e.Outcome)
		assert.Equal(t, 1, calls, "no attempt after the lease was lost")
	})
}

func TestIdempotentAbandonedClaimIsTakenOverAfterItsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		// A worker claims the key and crashes: nobody releases it.
		cl, err := store.Claim(context.Background(), "k", "", 5*time.Minute)
		require.NoError(t, err)
		require.Equal(t, idempotency.ClaimAcquired, cl.Status)

		calls := 0
		fn := func(context.Context) (int, error) { calls++; return 7, nil }
		opts := []retry.Option{retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", FailWhileHeld: true, Lease: 5 * time.Minute}), retry.WithMaxAttempts(1)}

		time.Sleep(5*time.Minute - time.Nanosecond)
		_, err = retry.DoValue(context.Background(), fn, opts...)
		require.ErrorIs(t, err, retry.ErrInProgress, "the lease still runs")
		assert.Equal(t, 0, calls)

		time.Sleep(time.Nanosecond)
		v, err := retry.DoValue(context.Background(), fn, opts...)
		require.NoError(t, err, "the expired lease is taken over")
		assert.Equal(t, 7, v)
		assert.Equal(t, 1, calls)
		assert.ErrorIs(t, store.Complete(context.Background(), "k", cl.Token, idempotency.StoredOutcome{}, time.Hour), idempotency.ErrLeaseLost,
			"the crashed worker cannot overwrite the outcome")

		time.Sleep(24*time.Hour - time.Nanosecond)
		v, err = retry.DoValue(context.Background(), fn, opts...)
		require.NoError(t, err)
		assert.Equal(t, 7, v)
		assert.Equal(t, 1, calls, "replayed until the retention ends")
		time.Sleep(time.Nanosecond)
		_, err = retry.DoValue(context.Background(), fn, opts...)
		require.NoError(t, err)
		assert.Equal(t, 2, calls, "a new call after the retention")
	})
}

// TestIdempotentCompleteLeaseLostAtOnce: the first Complete finds the
// lease lost (another caller took the key over): nothing of ours can be
// stored, so Do says so at once instead of trying again for ever.
func TestIdempotentCompleteLeaseLostAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaulty()
		store.set(func(f *faultyStore) { f.completeErr = idempotency.ErrLeaseLost })
		done := make(chan error, 1)
		go func() {
			done <- retry.Do(context.Background(), succeed, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
		}()
		synctest.Wait()
		var err error
		select {
		case err = <-done:
		default:
			t.Fatal("Do is still trying to record an outcome its lease no longer covers")
		}
		require.ErrorIs(t, err, retry.ErrOutcomeNotRecorded)
		require.ErrorIs(t, err, idempotency.ErrLeaseLost)
		assert.Equal(t, 1, store.counts()[2], "one Complete")
	})
}

// leaseLosingStore fails the first Complete with a transient error and
// every later one with ErrLeaseLost, though Claim keeps granting the key.
type leaseLosingStore struct {
	idempotency.Store
	completes atomic.Int64
}

func (s *leaseLosingStore) Claim(context.Context, string, string, time.Duration) (idempotency.Claim, error) {
	return idempotency.Claim{Status: idempotency.ClaimAcquired, Token: "t"}, nil
}

func (s *leaseLosingStore) Complete(context.Context, string, string, idempotency.StoredOutcome, time.Duration) error {
	if s.completes.Add(1) == 1 {
		return errors.New("connection reset")
	}
	return idempotency.ErrLeaseLost
}

func TestIdempotentCompleteStoreThatLosesEveryLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &leaseLosingStore{Store: memstore.New(nil)}
		done := make(chan error, 1)
		go func() {
			done <- retry.Do(context.Background(), succeed, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
		}()
		time.Sleep(time.Minute) // virtual: far more than any retry of Complete needs
		var err error
		select {
		case err = <-done:
		default:
			t.Fatal("Do is still trying to record its outcome")
		}
		require.ErrorIs(t, err, retry.ErrOutcomeNotRecorded)
		assert.LessOrEqual(t, store.completes.Load(), int64(3), "one try, one after a renewal lost, one after the key was claimed again")
	})
}

// lateDeadline is a context whose deadline has passed on the clock but
// whose timer has not fired yet: Err is still nil, as a context's is for a
// moment after its deadline.
type lateDeadline struct {
	context.Context
	deadline time.Time
}

func (c lateDeadline) Deadline() (time.Time, bool) { return c.deadline, true }

// slowClaims answers each Claim after a delay.
type slowClaims struct {
	idempotency.Store
	delay time.Duration
}

func (s slowClaims) Claim(ctx context.Context, key, fp string, lease time.Duration) (idempotency.Claim, error) {
	time.Sleep(s.delay)
	return s.Store.Claim(ctx, key, fp, lease)
}

// A call stopped because its deadline has passed (before the context's
// timer said so) ends with OutcomeDeadline and context.DeadlineExceeded,
// also when no attempt called fn: a caller waiting for another holder of
// its key, or a FailWhileHeld attempt that found it held, whose look at the
// store was answered just after the deadline.
func TestIdempotentDeadlinePassedBeforeTheContextSaidSo(t *testing.T) {
	for _, failWhileHeld := range []bool{false, true} {
		t.Run(fmt.Sprint("failWhileHeld=", failWhileHeld), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memstore.New(nil)
				cl, err := store.Claim(context.Background(), "k", "", time.Hour) // another caller holds the key
				require.NoError(t, err)
				require.Equal(t, idempotency.ClaimAcquired, cl.Status)
				ctx := lateDeadline{context.Background(), time.Now().Add(time.Second)}
				err = retry.Do(ctx, func(context.Context) error { t.Error("fn ran"); return nil },
					retry.WithIdempotency(slowClaims{store, 1500 * time.Millisecond}, &retry.IdempotencyOptions{Key: "k", FailWhileHeld: failWhileHeld}),
					retry.WithBackoff(retry.Constant(900*time.Millisecond)), retry.WithJitter(retry.NoJitter),
					retry.WithMaxAttempts(10))
				var e *retry.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, retry.OutcomeDeadline, e.Outcome, "")
				assert.ErrorIs(t, err, context.DeadlineExceeded, "")
				assert.ErrorIs(t, err, retry.ErrInProgress)
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
		require.ErrorIs(t, err, idempotency.ErrLeaseLost)
		assert.Zero(t, sink.Len(), "not dead-lettered")
	})
}

// Nesting: idempotent calls inside another call's fn, or around another
// Retrier, keep their own keys and do not repeat or dead-letter a replay.

func TestIdempotentReplayedPermanentFailureStopsAnOuterDo(t *testing.T) {
	store := memstore.New(nil)
	inner := func(ctx context.Context) error {
		return retry.Do(ctx, func(context.Context) error { return retry.Permanent(errors.New("card declined")) },
			retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
	}
	for _, name := range []string{"original", "replayed"} {
		outer := 0
		err := retry.Do(context.Background(), func(ctx context.Context) error { outer++; return inner(ctx) },
			retry.WithMaxAttempts(5), retry.WithBackoff(retry.Constant(0)))
		assert.True(t, retry.IsPermanent(err), name)
		assert.Equal(t, 1, outer, "%s: the outer Do stops at once", name)
	}
}

func TestIdempotentReplayFoundInsideTheLoopIsNotDeadLetteredAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		sink := deadletter.NewMemorySink()
		go func() {
			_ = retry.Do(context.Background(), func(context.Context) error {
				time.Sleep(150 * time.Millisecond)
				return retry.Permanent(errors.New("card declined"))
			}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}), retry.WithDeadLetter(sink, nil))
		}()
		synctest.Wait()
		// This caller backs off while the holder runs, then finds its
		// stored failure.
		err := retry.Do(context.Background(), func(context.Context) error {
			t.Error("fn called although the holder completed")
			return nil
		}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", FailWhileHeld: true}), retry.WithDeadLetter(sink, nil),
			retry.WithBackoff(retry.Constant(100*time.Millisecond)), retry.WithJitter(retry.NoJitter))
		require.ErrorIs(t, err, retry.ErrReplayed)
		assert.Equal(t, 1, sink.Len(), "only the call that failed is dead-lettered")
	})
}

func TestIdempotentOuterDoDoesNotRepeatAnUnrecordedSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaulty()
		store.set(func(f *faultyStore) { f.completeErr = errors.New("down") })
		calls := 0
		outer := 0
		err := retry.Do(context.Background(), func(ctx context.Context) error {
			outer++
			return retry.Do(ctx, func(context.Context) error { calls++; return nil }, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
		}, retry.WithMaxAttempts(5))
		require.ErrorIs(t, err, retry.ErrOutcomeNotRecorded)
		assert.Equal(t, 1, outer)
		assert.Equal(t, 1, calls)
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

// Keys are global within a store: an inner call with the enclosing call's
// context key but another store holds another key, and runs.
func TestIdempotent_nestedCallInAnotherStoreRuns(t *testing.T) {
	outer := mustNew(t, retry.WithIdempotency(memstore.New(nil), nil))
	inner := mustNew(t, retry.WithIdempotency(memstore.New(nil), nil))
	ctx := retry.ContextWithIdempotencyKey(context.Background(), "order-1")
	ran := false
	err := outer.Do(ctx, func(ctx context.Context) error {
		return inner.Do(ctx, func(context.Context) error { ran = true; return nil })
	})
	require.NoError(t, err)
	assert.True(t, ran)
}

// idempotentWithSinkDown is an idempotent Retrier whose dead-letter sink
// fails until down is cleared, then writes to backend.
func idempotentWithSinkDown(t *testing.T) (r *retry.Retrier, backend *deadletter.MemorySink, down *atomic.Bool) {
	down = new(atomic.Bool)
	down.Store(true)
	backend = deadletter.NewMemorySink()
	sink := deadletter.Func(func(ctx context.Context, dl retry.DeadLetter) error {
		if down.Load() {
			return errors.New("sink down")
		}
		return backend.Put(ctx, dl)
	})
	r = mustNew(t, retry.WithIdempotency(memstore.New(nil), nil), retry.WithDeadLetter(sink, nil), retry.WithName("charge"))
	return r, backend, down
}

// A failure for good whose dead letter cannot be written is not made
// final in the store: a later call under the key runs fn again, and its
// failure is dead-lettered once the sink is back, instead of replaying a
// failure that no record holds (a queue's retry of the job would).
func TestIdempotency_failureWithoutItsDeadLetterIsNotStored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, backend, down := idempotentWithSinkDown(t)
		ctx := retry.ContextWithIdempotencyKey(t.Context(), "order-9")
		calls := 0
		fn := func(context.Context) error { calls++; return retry.Permanent(errors.New("card declined")) }
		err := r.Do(ctx, fn)
		require.ErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
		assert.Zero(t, backend.Len())

		down.Store(false)
		err = r.Do(ctx, fn)
		require.Error(t, err)
		assert.NotErrorIs(t, err, retry.ErrReplayed, "the failure was not stored: fn runs again")
		assert.Equal(t, 2, calls)
		require.Equal(t, 1, backend.Len(), "its dead letter is written now")
		assert.Equal(t, "order-9", backend.Records()[0].IdempotencyKey)

		// Recorded with its dead letter, the failure is final now.
		err = r.Do(ctx, fn)
		assert.ErrorIs(t, err, retry.ErrReplayed)
		assert.Equal(t, 2, calls)
	})
}

func TestIdempotency_unknownOutcomeWithoutItsDeadLetterIsLetteredByItsReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, backend, down := idempotentWithSinkDown(t)
		calls := 0
		fn := func(ctx context.Context) error { calls++; <-ctx.Done(); return ctx.Err() }
		ctx, cancel := context.WithTimeout(retry.ContextWithIdempotencyKey(t.Context(), "order-9"), time.Second)
		err := r.Do(ctx, fn)
		cancel()
		require.ErrorIs(t, err, retry.ErrOutcomeUnknown)
		require.ErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
		assert.Zero(t, backend.Len())

		// fn may have acted: it is not run again, but the replay writes
		// the dead letter that no one wrote.
		down.Store(false)
		ctx = retry.ContextWithIdempotencyKey(t.Context(), "order-9")
		err = r.Do(ctx, fn)
		require.ErrorIs(t, err, retry.ErrReplayed)
		require.ErrorIs(t, err, retry.ErrOutcomeUnknown)
		assert.NotErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
		assert.Equal(t, 1, calls)
		require.Equal(t, 1, backend.Len())
		dl := backend.Records()[0]
		assert.Equal(t, "order-9", dl.IdempotencyKey)
		assert.Equal(t, retry.OutcomeUnknown, dl.Reason)
	})
}

func TestIdempotency_unknownOutcomeWithItsDeadLetterIsNotLetteredAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := deadletter.NewMemorySink()
		r := mustNew(t, retry.WithIdempotency(memstore.New(nil), nil), retry.WithDeadLetter(sink, nil), retry.WithName("charge"))
		fn := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
		ctx, cancel := context.WithTimeout(retry.ContextWithIdempotencyKey(t.Context(), "order-9"), time.Second)
		err := r.Do(ctx, fn)
		cancel()
		require.ErrorIs(t, err, retry.ErrOutcomeUnknown)
		require.Equal(t, 1, sink.Len())

		err = r.Do(retry.ContextWithIdempotencyKey(t.Context(), "order-9"), fn)
		require.ErrorIs(t, err, retry.ErrReplayed)
		assert.Equal(t, 1, sink.Len(), "a replay is not failed work")
	})
}

// deadlineSpy records whether the contexts of Claim and Complete had a
// deadline.
type deadlineSpy struct {
	idempotency.Store
	calls, withDeadline atomic.Int32
}

func (s *deadlineSpy) note(ctx context.Context) {
	s.calls.Add(1)
	if _, ok := ctx.Deadline(); ok {
		s.withDeadline.Add(1)
	}
}

func (s *deadlineSpy) Claim(ctx context.Context, key, fp string, lease time.Duration) (idempotency.Claim, error) {
	s.note(ctx)
	return s.Store.Claim(ctx, key, fp, lease)
}

func (s *deadlineSpy) Complete(ctx context.Context, key, token string, out idempotency.StoredOutcome, retention time.Duration) error {
	s.note(ctx)
	return s.Store.Complete(ctx, key, token, out, retention)
}

// nonBlockingSpy is a deadlineSpy that declares its calls never block.
type nonBlockingSpy struct{ *deadlineSpy }

func (nonBlockingSpy) NeverBlocks() {}

// A store that may block is called under StoreTimeout; one that
// declares it never blocks (idempotency.NonBlocking) without a timer,
// and its Complete still outlasts a caller who gave up.
func TestIdempotentNonBlockingStoreGetsNoStoreTimeout(t *testing.T) {
	for _, nonBlocking := range []bool{false, true} {
		t.Run(fmt.Sprint("nonBlocking=", nonBlocking), func(t *testing.T) {
			spy := &deadlineSpy{Store: memstore.New(nil)}
			var store idempotency.Store = spy
			if nonBlocking {
				store = nonBlockingSpy{spy}
			}
			ctx, cancel := context.WithCancel(context.Background())
			v, err := retry.DoValue(ctx, func(context.Context) (int, error) {
				cancel() // Complete must not see the caller's cancellation
				return 7, nil
			}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
			require.NoError(t, err)
			assert.Equal(t, 7, v)
			require.Equal(t, int32(2), spy.calls.Load(), "one Claim, one Complete")
			want := int32(2)
			if nonBlocking {
				want = 0
			}
			assert.Equal(t, want, spy.withDeadline.Load(), "store calls bounded by StoreTimeout")
			v, err = retry.DoValue(context.Background(), func(context.Context) (int, error) { return 0, errors.New("ran again") },
				retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
			require.NoError(t, err)
			assert.Equal(t, 7, v, "replayed")
		})
	}
}
