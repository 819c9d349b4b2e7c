package retry_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
)

// countingStore counts Renew calls; hangRenew makes every Renew wait for
// its context.
type countingStore struct {
	retry.IdempotencyStore
	renews    atomic.Int32
	hangRenew atomic.Bool
}

func (s *countingStore) Renew(ctx context.Context, key, token string, lease time.Duration) error {
	s.renews.Add(1)
	if s.hangRenew.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.IdempotencyStore.Renew(ctx, key, token, lease)
}

// A panic in fn releases the claim and unwinds Do: nothing of the call
// may go on after that. The renewer's timer must stop with fn, or it
// renews a claim Do released (and keeps fn's context, a child of the
// caller's, alive until then).
func TestIdempotentPanicInFnStopsTheRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countingStore{IdempotencyStore: memstore.New(nil)}
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
		store := &countingStore{IdempotencyStore: memstore.New(nil)}
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
