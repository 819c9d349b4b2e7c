package retry_test

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/overload"
)

// TestBudget_ratioCountsACallWhoseFirstLooksFoundTheKeyHeld: with
// FailWhileHeld, the looks at a held key are attempts that do not call fn,
// so the attempt that then calls fn is not attempt 1; a Ratio, which
// counts a call at attempt 1 only, never counted this one, yet was asked
// for its retry. With Ratio 1 and no reserve, the call's one retry must be
// allowed: the call made one call of the downstream.
func TestBudget_ratioCountsACallWhoseFirstLooksFoundTheKeyHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		cl, err := store.Claim(t.Context(), "k", "", time.Minute)
		require.NoError(t, err)
		b, err := overload.NewRatio(overload.RatioOptions{Ratio: 1, MinPerSecond: overload.None})
		require.NoError(t, err)
		r := mustNew(t, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", FailWhileHeld: true}),
			retry.WithBudget(b), retry.WithMaxAttempts(math.MaxInt),
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
		assert.NoError(t, <-done, "the call's one retry is within Ratio 1 of its one call")
		assert.EqualValues(t, 2, calls.Load())
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
	r := mustNew(t, retry.WithBudget(b), retry.WithClock(mock))
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
