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
		{"ratio_negative", overload.RatioOptions{Ratio: -1}, "Ratio -1"},
		{"ratio_too_big", overload.RatioOptions{Ratio: 11}, "Ratio 11"},
		{"window_short", overload.RatioOptions{Window: time.Millisecond}, "Window 1ms"},
		{"window_fraction", overload.RatioOptions{Window: 1500 * time.Millisecond}, "Window 1.5s"},
		{"window_long", overload.RatioOptions{Window: 2 * time.Minute}, "Window 2m0s"},
		{"min_negative", overload.RatioOptions{MinPerSecond: -1}, "MinPerSecond -1"},
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
	// The first retry starts the window: calls before it are not known.
	assert.Equal(t, 10, retries(b), "the reserve: 1/s over a 10 s window")
	call(b, 1000)
	assert.Equal(t, 100, retries(b), "10 % of the calls in the window")
	mock.Add(5 * time.Second)
	call(b, 500)
	assert.Equal(t, 50, retries(b))
	// 10 s after the first second, its calls and retries leave the window.
	mock.Add(5 * time.Second)
	assert.Equal(t, 0, retries(b), "the second half's 500 calls allow 50 retries, all taken")
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

// TestRatio_zeroValueThroughDo: retry.Do with WithBudget(&overload.Ratio{})
// makes the first attempt, then ends the call refused, with the zero
// Ratio's error and the attempt's; the old code panicked at the first
// retry.
func TestRatio_zeroValueThroughDo(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	var err error
	require.NotPanics(t, func() {
		err = retry.Do(context.Background(), func(context.Context) error { calls++; return boom },
			retry.WithBudget(&overload.Ratio{}), retry.WithBackoff(retry.Constant(0)))
	})
	assert.Equal(t, 1, calls, "the first attempt is never refused; no retry")
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.OutcomeRefused, re.Outcome)
	assert.ErrorIs(t, err, overload.ErrBudgetExhausted)
	assert.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "a Ratio must be made with NewRatio")
}
