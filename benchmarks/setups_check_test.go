package benchmarks

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSetups_doWhatTheBenchmarksSay checks each benchmark setup once: a
// first-try setup calls the operation once and succeeds; a zero-wait
// setup calls it 4 times, succeeds, and waits no time at all (synctest's
// fake clock would show any wait exactly).
func TestSetups_doWhatTheBenchmarksSay(t *testing.T) {
	check := func(t *testing.T, s setup, failures, wantCalls int) {
		synctest.Test(t, func(t *testing.T) {
			calls := 0
			inner := failThenSucceed(failures)
			fn := func(ctx context.Context) error { calls++; return inner(ctx) }
			start := time.Now()
			err := s.build()(context.Background(), fn)
			require.NoError(t, err)
			assert.Equal(t, wantCalls, calls)
			assert.Equal(t, time.Duration(0), time.Since(start))
		})
	}
	for _, s := range firstTrySetups {
		t.Run("FirstTry/"+s.name, func(t *testing.T) { check(t, s, 0, 1) })
	}
	for _, s := range zeroWaitSetups {
		t.Run("ThreeFailures/"+s.name, func(t *testing.T) { check(t, s, 3, 4) })
	}
}

// TestParkedSetups_waitAnHourAfterOneFailure checks each parked setup
// once: it calls the operation once, is still waiting a second before the
// hour is up, and returns an error as soon as its context is cancelled.
func TestParkedSetups_waitAnHourAfterOneFailure(t *testing.T) {
	for _, s := range parkedSetups {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				calls := 0
				fail := s.transient(errTransient)
				fn := func(context.Context) error { calls++; return fail }
				var err error
				done := make(chan struct{})
				go func() { err = s.build()(ctx, fn); close(done) }()
				time.Sleep(time.Hour - time.Second)
				synctest.Wait()
				select {
				case <-done:
					t.Fatalf("returned before the hour was up: %v", err)
				default:
				}
				assert.Equal(t, 1, calls)
				start := time.Now()
				cancel()
				<-done
				require.Error(t, err)
				assert.Equal(t, time.Duration(0), time.Since(start))
				assert.Equal(t, 1, calls)
			})
		})
	}
}
