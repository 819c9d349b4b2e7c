package retry_test

import (
	"context"
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
