// Package adaptertest holds test scenarios shared by the observers of the
// root module, retryprom and retryotel, so that each proves the same
// behaviour against its own metrics.
package adaptertest

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
)

// ErrFlaky is the error of the functions returned by Failing.
var ErrFlaky = errors.New("flaky")

// Failing returns a function that fails with ErrFlaky n-1 times, then
// returns last. It is for one call of Do at a time.
func Failing(n int, last error) func(context.Context) error {
	calls := 0
	return func(context.Context) error {
		calls++
		if calls < n {
			return ErrFlaky
		}
		return last
	}
}

// Gauges runs 20 calls of the operation "op" through obs at once, each
// failing, with 3 attempts and 1s waits, in a synctest bubble. Half the
// calls have a 1.5s deadline, so they stop when their second wait would
// pass it; the rest are cancelled during their second wait. It checks the
// calls in flight and the waits in progress, as read by inFlight and
// waiting, at each step: all 20 calls, then 10, then none.
func Gauges(t *testing.T, obs retry.Observer, inFlight, waiting func() float64) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		const n = 20
		r, err := retry.New(retry.WithName("op"), retry.WithObserver(obs), retry.WithMaxAttempts(3),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				c := ctx
				if i%2 == 0 {
					var cc context.CancelFunc
					c, cc = context.WithTimeout(ctx, 1500*time.Millisecond)
					defer cc()
				}
				_ = r.Do(c, Failing(9, nil))
			})
		}
		synctest.Wait()
		assert.Equal(t, float64(n), inFlight(), "in flight, all waiting")
		assert.Equal(t, float64(n), waiting(), "waiting, all waiting")
		time.Sleep(1200 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, float64(n/2), inFlight(), "in flight, after the deadlines")
		assert.Equal(t, float64(n/2), waiting(), "waiting, after the deadlines")
		cancel()
		wg.Wait()
		assert.Equal(t, float64(0), inFlight(), "in flight at the end")
		assert.Equal(t, float64(0), waiting(), "waiting at the end")
	})
}

// ThreeCalls makes three calls of the operation "charge-card" through obs,
// with 3 attempts and 1s waits, in a synctest bubble: a success after 2
// retries (2s), attempts exhausted (2s), and a permanent error at the
// first attempt (0s). That is 7 attempts, 4 retries.
func ThreeCalls(t *testing.T, obs retry.Observer) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		r, err := retry.New(retry.WithName("charge-card"), retry.WithObserver(obs),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter))
		require.NoError(t, err)
		ctx := t.Context()
		require.NoError(t, r.Do(ctx, Failing(3, nil)))
		require.ErrorIs(t, r.Do(ctx, Failing(9, nil)), retry.ErrExhausted)
		require.ErrorIs(t, r.Do(ctx, Failing(1, retry.Permanent(ErrFlaky))), ErrFlaky)
	})
}

// NoAllocation checks that a first-try success through a Retrier with obs
// makes no allocation. It skips under the race detector.
func NoAllocation(t *testing.T, obs retry.Observer) {
	t.Helper()
	if RaceEnabled {
		t.Skip("the race detector allocates")
	}
	r, err := retry.New(retry.WithName("charge-card"), retry.WithObserver(obs))
	require.NoError(t, err)
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	_ = r.Do(ctx, fn) // creates the operation's series
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _ = r.Do(ctx, fn) }))
}
