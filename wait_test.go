package retry_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
)

// TestRetrier_WaitIsDosSchedule checks that Wait, given the samples of a
// fixed source, gives the waits Do takes with the same source, for every
// kind of schedule: one sample (jitter, Decorrelated), two (a randomized
// custom Backoff and a jitter), none (NoJitter), and capped.
func TestRetrier_WaitIsDosSchedule(t *testing.T) {
	for name, opts := range map[string][]retry.Option{
		"exponential full jitter capped": {retry.WithBackoff(retry.Exponential(10*time.Millisecond, 3, time.Second)), retry.WithMaxDelay(400 * time.Millisecond)},
		"default":                        nil,
		"decorrelated":                   {retry.WithBackoff(retry.Decorrelated(10*time.Millisecond, time.Second))},
		"custom random, equal jitter":    {retry.WithBackoff(sampled{}), retry.WithJitter(retry.EqualJitter)},
		"linear proportional":            {retry.WithBackoff(retry.Linear(time.Millisecond, 5*time.Millisecond, time.Second)), retry.WithJitter(retry.ProportionalJitter(0.2))},
		"no jitter":                      {retry.WithJitter(retry.NoJitter)},
	} {
		t.Run(name, func(t *testing.T) {
			const attempts = 8
			var got []time.Duration
			synctest.Test(t, func(t *testing.T) {
				rec := &recorder{}
				r, err := retry.New(append(opts, retry.WithMaxAttempts(attempts), retry.WithRandom(rand.NewPCG(1, 2)), retry.WithObserver(rec), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))...)
				require.NoError(t, err)
				err = r.Do(t.Context(), func(context.Context) error { return errTransient })
				require.ErrorIs(t, err, retry.ErrExhausted)
				got = rec.delays()
			})
			require.Len(t, got, attempts-1)

			r, err := retry.New(opts...)
			require.NoError(t, err)
			src := rand.NewPCG(1, 2)
			sample := func() float64 { return float64(src.Uint64()>>11) / (1 << 53) } // as WithRandom draws
			var prev time.Duration
			for i, want := range got {
				d, server := r.Wait(i+1, prev, errTransient, sample)
				assert.False(t, server)
				assert.Equal(t, want, d, "the wait after attempt %d", i+1)
				prev = d
			}
		})
	}
}

// sampled is a custom Backoff that reads its sample: Do then draws two
// per wait, the schedule's and the jitter's.
type sampled struct{}

func (sampled) Delay(attempt int, _ time.Duration, rnd float64) time.Duration {
	return time.Duration(attempt)*time.Millisecond + time.Duration(rnd*float64(time.Millisecond))
}

func TestRetrier_WaitServerDelay(t *testing.T) {
	never := func() float64 { t.Fatal("a server's delay draws no sample"); return 0 }

	r, err := retry.New()
	require.NoError(t, err)
	d, server := r.Wait(1, 0, retry.After(errTransient, time.Hour), never)
	assert.True(t, server)
	assert.Equal(t, 30*time.Second, d, "capped at 30s without WithMaxDelay")

	r, err = retry.New(retry.WithMaxDelay(time.Second))
	require.NoError(t, err)
	d, server = r.Wait(3, 0, retry.After(errTransient, time.Minute), never)
	assert.True(t, server)
	assert.Equal(t, time.Second, d, "capped by WithMaxDelay")
	d, _ = r.Wait(3, 0, retry.After(errTransient, time.Millisecond), never)
	assert.Equal(t, time.Millisecond, d)

	// An After inside another Retrier's *Error is that Retrier's, as Do reads it.
	inner := retry.Do(context.Background(), func(context.Context) error { return retry.After(errTransient, time.Minute) },
		retry.WithMaxAttempts(1))
	_, server = r.Wait(1, 0, inner, func() float64 { return 0.5 })
	assert.False(t, server)
}

func TestRetrier_WaitNilAndZero(t *testing.T) {
	var zero retry.Retrier
	half := func() float64 { return 0.5 }
	d, _ := (*retry.Retrier)(nil).Wait(1, 0, nil, half)
	assert.Equal(t, 50*time.Millisecond, d, "the zero Retrier: FullJitter of 100ms at 0.5")
	d, _ = zero.Wait(2, 0, nil, half)
	assert.Equal(t, 100*time.Millisecond, d)
	r, err := retry.New(retry.WithBackoff(retry.Constant(0)))
	require.NoError(t, err)
	d, _ = r.Wait(1, 0, nil, half)
	assert.Zero(t, d)
}
