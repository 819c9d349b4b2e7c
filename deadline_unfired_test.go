package retry_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
)

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
	retry.IdempotencyStore
	delay time.Duration
}

func (s slowClaims) Claim(ctx context.Context, key, fp string, lease time.Duration) (retry.Claim, error) {
	time.Sleep(s.delay)
	return s.IdempotencyStore.Claim(ctx, key, fp, lease)
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
				require.Equal(t, retry.ClaimAcquired, cl.Status)
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
