package overload_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
)

func TestNewRatio_refusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    overload.RatioOptions
		want string
	}{
		{"ratio_negative", overload.RatioOptions{Ratio: -0.5}, "Ratio -0.5"},
		{"ratio_below_none", overload.RatioOptions{Ratio: -2}, "use None for no ratio"},
		{"ratio_too_big", overload.RatioOptions{Ratio: 11}, "Ratio 11"},
		{"window_short", overload.RatioOptions{Window: time.Millisecond}, "Window 1ms"},
		{"window_fraction", overload.RatioOptions{Window: 1500 * time.Millisecond}, "Window 1.5s"},
		{"window_long", overload.RatioOptions{Window: 2 * time.Minute}, "Window 2m0s"},
		{"min_negative", overload.RatioOptions{MinPerSecond: -2}, "MinPerSecond -2"},
		{"waiting_negative", overload.RatioOptions{MaxWaiting: -2}, "MaxWaiting -2"},
		// A nil *clock.Mock would panic at the first retry, inside Do.
		{"clock_nil_pointer", overload.RatioOptions{Clock: (*clock.Mock)(nil)}, "Clock (*clock.Mock)(nil) is a nil pointer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := overload.NewRatio(tc.o)
			require.Error(t, err)
			assert.Nil(t, b)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// call counts one call, as a first attempt does.
func call(b *overload.Ratio, n int) {
	for range n {
		b.Attempted(1, false, false)
	}
}

// retries asks for retries until one is refused, and counts the allowed.
func retries(b *overload.Ratio) int {
	n := 0
	for b.Retry(0) == nil {
		n++
	}
	return n
}

func TestRatio_allowsARatioOfCallsPlusTheReserve(t *testing.T) {
	mock := clock.NewMock()
	b, err := overload.NewRatio(overload.RatioOptions{Ratio: 0.1, MinPerSecond: 1, Window: 10 * time.Second, Clock: mock})
	require.NoError(t, err)
	assert.Equal(t, 10, retries(b), "the reserve: 1/s over a 10 s window")
	call(b, 1000)
	assert.Equal(t, 100, retries(b), "10 % of the calls in the window")
	mock.Add(5 * time.Second)
	call(b, 500)
	assert.Equal(t, 50, retries(b))
	// 10 s after the first second, its calls and retries leave the window.
	mock.Add(5 * time.Second)
	// The 500 calls counted at second 5 are spread over seconds 0 to 5,
	// as a steady load would make them: the window of seconds 1 to 10
	// holds 417 of them, 41 retries, and the reserve's 10; second 5 took 50.
	assert.Equal(t, 1, retries(b), "second 0's calls left the window, and a sixth of second 5's")
	mock.Add(10 * time.Second)
	assert.Equal(t, 10, retries(b), "a new window: only the reserve")
	// Later attempts count no call.
	b.Attempted(2, true, false)
	b.Attempted(3, false, false)
	assert.ErrorIs(t, b.Retry(0), overload.ErrBudgetExhausted)
}

func TestRatio_recoversWithinOneWindow(t *testing.T) {
	mock := clock.NewMock()
	b, err := overload.NewRatio(overload.RatioOptions{MinPerSecond: 1, Clock: mock})
	require.NoError(t, err)
	for range 60 { // an outage: 200 calls/s, every retry asked for
		call(b, 200)
		retries(b)
		mock.Add(time.Second)
	}
	call(b, 200)
	assert.Positive(t, retries(b), "healthy traffic keeps earning retries")
}

// TestRatio_countsEveryCall shares one budget among 64 goroutines: the
// retries allowed are exactly the ratio of the calls counted, plus the
// reserve.
func TestRatio_countsEveryCall(t *testing.T) {
	mock := clock.NewMock()
	b, err := overload.NewRatio(overload.RatioOptions{Ratio: 0.1, MinPerSecond: 1, Clock: mock})
	require.NoError(t, err)
	require.NoError(t, b.Retry(0)) // start the window
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() { call(b, 1000) })
	}
	wg.Wait()
	var allowed sync.WaitGroup
	var mu sync.Mutex
	n := 1
	for range 64 {
		allowed.Go(func() {
			for b.Retry(0) == nil {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	allowed.Wait()
	assert.Equal(t, 64*1000/10+10, n)
}

func TestRatio_maxWaitingGivesBackTheRetry(t *testing.T) {
	mock := clock.NewMock()
	b, err := overload.NewRatio(overload.RatioOptions{MaxWaiting: 1, MinPerSecond: 1, Clock: mock})
	require.NoError(t, err)
	require.NoError(t, b.Retry(time.Second))
	require.ErrorIs(t, b.Retry(time.Second), overload.ErrBudgetExhausted)
	b.Waited()
	// 10 reserve: one waited, one refused by the limit (given back).
	assert.Equal(t, 9, retries(b))
}

// TestRatio_zeroValueRefusesRetries: the zero Ratio, not made with
// NewRatio, panics in none of its methods; it counts calls and refuses
// every retry with an error that says why. The old code panicked in Retry
// (a nil clock).
func TestRatio_zeroValueRefusesRetries(t *testing.T) {
	var b overload.Ratio
	assert.NotPanics(t, func() {
		b.Attempted(1, false, false)
		b.Attempted(2, true, false)
		b.Attempted(3, true, true)
	})
	for _, wait := range []time.Duration{0, time.Second} {
		var err error
		require.NotPanics(t, func() { err = b.Retry(wait) })
		require.ErrorIs(t, err, overload.ErrBudgetExhausted)
		assert.Contains(t, err.Error(), "a Ratio must be made with NewRatio")
	}
	assert.NotPanics(t, b.Waited)
}

// TestRatio_zeroValueThroughDo: retry.Do with WithOverload(&OverloadOptions{Budget: &overload.Ratio{}})
// makes the first attempt, then ends the call refused, with the zero
// Ratio's error and the attempt's; the old code panicked at the first
// retry.
func TestRatio_zeroValueThroughDo(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	var err error
	require.NotPanics(t, func() {
		err = retry.Do(context.Background(), func(context.Context) error { calls++; return boom },
			retry.WithOverload(&retry.OverloadOptions{Budget: &overload.Ratio{}}), retry.WithBackoff(retry.Constant(0)))
	})
	assert.Equal(t, 1, calls, "the first attempt is never refused; no retry")
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.OutcomeRefused, re.Outcome)
	assert.ErrorIs(t, err, overload.ErrBudgetExhausted)
	assert.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "a Ratio must be made with NewRatio")
}

// TestRatio_knowsCallsMadeWhileNoRetryWasAskedFor: after a quiet stretch
// of successes (no retry asked for), a burst of failures gets the ratio
// of the window's calls, not the reserve alone.
func TestRatio_knowsCallsMadeWhileNoRetryWasAskedFor(t *testing.T) {
	mock := clock.NewMock()
	b, err := overload.NewRatio(overload.RatioOptions{MinPerSecond: overload.None, Clock: mock})
	require.NoError(t, err)
	for i := range 60 { // a minute at 1,000 calls a second
		if i > 0 {
			mock.Add(time.Second)
		}
		for range 1000 {
			b.Attempted(1, false, false)
		}
	}
	allowed := 0
	for b.Retry(0) == nil {
		allowed++
	}
	// 10 % of the 10,000 calls of the window: the 60,000 counted are
	// spread over the 60 seconds since the budget was made.
	assert.Equal(t, 1000, allowed)
}

// TestRatio_FinagleSequences pins the ratio budget to the rule of the SRE
// book's per-client retry budget and Finagle's RetryBudget: over the
// window, retries allowed = ratio x calls + reserve per second x window
// seconds (10 s here); Finagle's empty budget (no ratio, no reserve)
// allows none.
func TestRatio_FinagleSequences(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       overload.RatioOptions
		calls   int
		allowed int
	}{
		{"empty budget", overload.RatioOptions{Ratio: overload.None, MinPerSecond: overload.None}, 1000, 0},
		{"reserve only", overload.RatioOptions{Ratio: overload.None, MinPerSecond: 1}, 1000, 10},
		{"ratio only: 20 % of 640", overload.RatioOptions{Ratio: 0.2, MinPerSecond: overload.None}, 640, 128},
		{"Finagle's default: 20 % and 10 a second", overload.RatioOptions{Ratio: 0.2, MinPerSecond: 10}, 640, 228},
		{"SRE: 10 % of 6,400, and the default reserve", overload.RatioOptions{}, 6400, 660},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Clock = clock.NewMock()
			b, err := overload.NewRatio(tc.o)
			require.NoError(t, err)
			call(b, tc.calls)
			assert.Equal(t, tc.allowed, retries(b))
		})
	}
}
