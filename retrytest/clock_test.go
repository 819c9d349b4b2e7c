package retrytest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrytest"
)

// The recipe of docs/testing.md, as written, for schedules with zero waits too: every
// wait arrives on Armed, a zero one as 0, so the loop never hangs.
func TestClock_recipeWorksForEverySchedule(t *testing.T) {
	defer goleak.VerifyNone(t)
	for name, tc := range map[string]struct {
		backoff retry.Backoff
		want    []time.Duration
	}{
		"constant_zero": {retry.Constant(0), []time.Duration{0, 0}},
		"exponential":   {retry.Exponential(time.Second, 2, time.Minute), []time.Duration{time.Second, 2 * time.Second}},
	} {
		t.Run(name, func(t *testing.T) {
			clk := retrytest.NewClock()
			r, err := retry.New(retry.WithClock(clk), retry.WithBackoff(tc.backoff), retry.WithJitter(retry.NoJitter))
			require.NoError(t, err)
			calls := 0
			done := make(chan error, 1)
			go func() {
				done <- r.Do(context.Background(), func(context.Context) error {
					calls++
					if calls < 3 {
						return errors.New("503")
					}
					return nil
				})
			}()
			var got []time.Duration
			for range 2 {
				d := <-clk.Armed() // Do is parked on the mock's timer now
				got = append(got, d)
				clk.Add(d)
			}
			require.NoError(t, <-done)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, 3, calls)
		})
	}
}
