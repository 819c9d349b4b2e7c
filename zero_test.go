package retry_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
)

// TestZeroMeansNoLimit: 0 turns a time limit off, also after an earlier
// non-zero value, and a zero cap, which would remove every wait, is refused.
func TestZeroMeansNoLimit(t *testing.T) {
	t.Run("max_elapsed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			err := retry.Do(t.Context(), func(context.Context) error { return errTransient },
				retry.WithBackoff(retry.Constant(time.Hour)), retry.WithMaxElapsed(time.Minute), retry.WithMaxElapsed(0))
			var re *retry.Error
			require.ErrorAs(t, err, &re)
			assert.Equal(t, retry.OutcomeExhausted, re.Outcome, "no budget: the hour-long waits are taken")
			assert.Equal(t, retry.DefaultMaxAttempts, re.Attempts)
		})
	})
	t.Run("attempt_timeout", func(t *testing.T) {
		var deadlines []bool
		err := retry.Do(t.Context(), func(ctx context.Context) error {
			_, ok := ctx.Deadline()
			deadlines = append(deadlines, ok)
			return nil
		}, retry.WithAttemptTimeout(time.Second), retry.WithAttemptTimeout(0))
		require.NoError(t, err)
		assert.Equal(t, []bool{false}, deadlines, "no per-attempt deadline")
	})
	t.Run("max_delay_is_refused", func(t *testing.T) {
		calls := 0
		err := retry.Do(t.Context(), func(context.Context) error { calls++; return errTransient }, retry.WithMaxDelay(0))
		require.ErrorIs(t, err, retry.ErrInvalidOption)
		assert.ErrorContains(t, err, "WithMaxDelay(0)")
		assert.ErrorContains(t, err, "WithBackoff(Constant(0))", "the error says how to get no waits")
		assert.Zero(t, calls)
	})
}
