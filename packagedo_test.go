package retry_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/memstore"
)

// TestDo_packageLevelOptionsActFromTheFirstAttempt: the package-level Do
// calls fn before it builds its policy only when no option acts on the
// first attempt; every option that does still acts on it.
func TestDo_packageLevelOptionsActFromTheFirstAttempt(t *testing.T) {
	t.Run("observer", func(t *testing.T) {
		rec := &recorder{}
		require.NoError(t, retry.Do(t.Context(), func(context.Context) error { return nil }, retry.WithObserver(rec)))
		assert.Equal(t, []string{"start", "end", "done"}, rec.events)
	})
	t.Run("attempt_timeout", func(t *testing.T) {
		hasDeadline := false
		require.NoError(t, retry.Do(t.Context(), func(ctx context.Context) error {
			_, hasDeadline = ctx.Deadline()
			return nil
		}, retry.WithAttemptTimeout(time.Minute)))
		assert.True(t, hasDeadline, "the first attempt has its own context")
	})
	t.Run("max_elapsed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			calls := 0
			err := retry.Do(t.Context(), func(context.Context) error {
				calls++
				time.Sleep(2 * time.Second)
				return errTransient
			}, retry.WithMaxElapsed(3*time.Second), retry.WithBackoff(retry.Constant(2*time.Second)),
				retry.WithJitter(retry.NoJitter), retry.WithMaxAttempts(5))
			var re *retry.Error
			require.ErrorAs(t, err, &re)
			assert.Equal(t, retry.OutcomeMaxElapsed, re.Outcome, "the budget counts the first attempt's 2s")
			assert.Equal(t, 1, calls)
		})
	})
	t.Run("idempotency", func(t *testing.T) {
		store := memstore.New(nil)
		ctx := retry.ContextWithIdempotencyKey(t.Context(), "order-1")
		calls := 0
		fn := func(context.Context) error { calls++; return nil }
		require.NoError(t, retry.Do(ctx, fn, retry.WithIdempotency(store, nil)))
		require.NoError(t, retry.Do(ctx, fn, retry.WithIdempotency(store, nil)))
		assert.Equal(t, 1, calls, "the second call replays the first one's success")
	})
	t.Run("dead_letter", func(t *testing.T) {
		sink := deadletter.NewMemorySink()
		err := retry.Do(t.Context(), func(context.Context) error { return errTransient },
			retry.WithDeadLetter(sink, nil), retry.WithMaxAttempts(1))
		require.ErrorIs(t, err, errTransient)
		assert.Equal(t, 1, sink.Len())
	})
	t.Run("bad_option_after_good_ones", func(t *testing.T) {
		calls := 0
		err := retry.Do(t.Context(), func(context.Context) error { calls++; return nil },
			retry.WithMaxAttempts(2), retry.WithBackoff(retry.Constant(0)), retry.WithJitter(retry.Jitter(99)))
		require.ErrorIs(t, err, retry.ErrInvalidOption)
		assert.Zero(t, calls)
	})
}

// TestDo_packageLevelOptionsActOnRetries: the options that the first
// attempt does not need, which the package-level Do applies only after it
// failed, shape the retries as they do on a Retrier.
func TestDo_packageLevelOptionsActOnRetries(t *testing.T) {
	t.Run("schedule", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clk := &advancingClock{Mock: clock.NewMock()}
			fn, calls := failing(5, errTransient)
			err := retry.Do(t.Context(), fn, retry.WithClock(clk), retry.WithMaxAttempts(3),
				retry.WithBackoff(retry.Linear(time.Second, time.Second, time.Minute)), retry.WithJitter(retry.NoJitter),
				retry.WithMaxDelay(1500*time.Millisecond), retry.WithName("op"))
			require.ErrorIs(t, err, retry.ErrExhausted)
			assert.Equal(t, int64(3), calls.Load())
			assert.Equal(t, []time.Duration{time.Second, 1500 * time.Millisecond}, clk.waits, "Linear, capped, on the given clock")
		})
	})
	t.Run("retry_if", func(t *testing.T) {
		fn, calls := failing(5, errFatal)
		err := retry.Do(t.Context(), fn, retry.WithBackoff(retry.Constant(0)),
			retry.WithRetryIf(func(err error) bool { return err != errFatal }))
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, retry.OutcomePermanent, re.Outcome)
		assert.Equal(t, int64(1), calls.Load())
	})
}

// advancingClock is a mock clock that records every wait Do arms and
// moves its time on by the wait at once.
type advancingClock struct {
	*clock.Mock
	waits []time.Duration
}

func (c *advancingClock) WaitArmed(d time.Duration) {
	c.waits = append(c.waits, d)
	c.Add(d)
}
