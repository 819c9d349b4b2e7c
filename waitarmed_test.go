package retry_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
)

func TestWithWaitArmed_isCalledForZeroWaitsWithoutATimer(t *testing.T) {
	// synctest turns a hook that is never called into a reported deadlock
	// instead of a hung test.
	synctest.Test(t, func(t *testing.T) {
		clk := &countingClock{Mock: clock.NewMock()}
		armed := make(chan time.Duration)
		r := mustNew(t, retry.WithClock(clk), retry.WithBackoff(retry.Constant(0)), retry.WithMaxAttempts(4),
			retry.WithWaitArmed(func(d time.Duration) { armed <- d }))
		fn, calls := failing(3, errTransient)
		done := make(chan error, 1)
		go func() { done <- r.Do(t.Context(), fn) }()
		var waits []time.Duration
		for range 3 {
			waits = append(waits, <-armed)
		}
		require.NoError(t, <-done)
		assert.Equal(t, []time.Duration{0, 0, 0}, waits, "one call per wait, with d = 0")
		assert.Equal(t, int64(4), calls.Load())
		assert.Zero(t, clk.timers.Load(), "a zero wait arms no timer")
	})
}

// TestReadmeMockClockRecipe runs the recipe of docs/testing.md (once in
// the README) as written, for
// schedules with non-zero, zero and mixed waits.
func TestReadmeMockClockRecipe(t *testing.T) {
	schedules := map[string][]retry.Option{
		"default":   nil,
		"constant0": {retry.WithBackoff(retry.Constant(0))},
		"mixed": {retry.WithBackoff(retry.BackoffFunc(func(attempt int) time.Duration {
			return time.Duration(attempt-1) * time.Second // 0, then 1s
		}))},
	}
	for name, extra := range schedules {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				fn, calls := failing(2, errTransient)

				// The recipe, from docs/testing.md "Testing your retrying code".
				mock := clock.NewMock()
				armed := make(chan time.Duration)
				r, _ := retry.New(append([]retry.Option{retry.WithClock(mock), retry.WithWaitArmed(func(d time.Duration) { armed <- d })}, extra...)...)
				done := make(chan error, 1)
				go func() { done <- r.Do(ctx, fn) }()
				for range 2 {
					mock.Add(<-armed) // Do is parked on the mock's timer now
				}
				err := <-done

				require.NoError(t, err)
				assert.Equal(t, int64(3), calls.Load())
			})
		})
	}
}
