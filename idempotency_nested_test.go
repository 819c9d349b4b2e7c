package retry_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
)

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

// renewDown accepts the claim, then fails every renewal.
type renewDown struct{ retry.IdempotencyStore }

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
