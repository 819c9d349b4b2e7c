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

// delaysOf runs a call that always fails and returns the waits Do chose.
func delaysOf(t *testing.T, fail func() error, opts ...retry.Option) []time.Duration {
	t.Helper()
	rec := &recorder{}
	synctest.Test(t, func(t *testing.T) {
		err := retry.Do(t.Context(), func(context.Context) error { return fail() },
			append([]retry.Option{retry.WithJitter(retry.NoJitter), retry.WithObserver(rec)}, opts...)...)
		require.ErrorIs(t, err, retry.ErrExhausted)
	})
	return rec.delays()
}

func TestDo_explicitBackoffIsNotCappedByTheDefaultMaxDelay(t *testing.T) {
	transient := func() error { return errTransient }
	assert.Equal(t, []time.Duration{2 * time.Minute, 2 * time.Minute},
		delaysOf(t, transient, retry.WithBackoff(retry.Constant(2*time.Minute))),
		"Constant(2m) waits 2m, not DefaultMaxDelay")
	assert.Equal(t, []time.Duration{time.Second, 10 * time.Second, 100 * time.Second, 1000 * time.Second, 10000 * time.Second, 24 * time.Hour},
		delaysOf(t, transient, retry.WithBackoff(retry.Exponential(time.Second, 10, 24*time.Hour)), retry.WithMaxAttempts(7)),
		"Exponential(1s, 10, 24h) grows up to its own max")
	assert.Equal(t, []time.Duration{time.Hour},
		delaysOf(t, transient, retry.WithBackoff(retry.BackoffFunc(func(int) time.Duration { return time.Hour })), retry.WithMaxAttempts(2)),
		"a custom schedule is honoured too")
}

func TestDo_defaultMaxDelayCapsOnlyServerSuppliedDelays(t *testing.T) {
	hinted := func() error { return retry.RetryAfter(errTransient, time.Hour) }
	assert.Equal(t, []time.Duration{retry.DefaultMaxDelay, retry.DefaultMaxDelay},
		delaysOf(t, hinted, retry.WithBackoff(retry.Constant(2*time.Minute))),
		"a Retry-After of 1h is still capped at DefaultMaxDelay")
}

func TestDo_explicitMaxDelayCapsBackoffAndHints(t *testing.T) {
	transient := func() error { return errTransient }
	hinted := func() error { return retry.RetryAfter(errTransient, time.Hour) }
	assert.Equal(t, []time.Duration{time.Minute, time.Minute},
		delaysOf(t, transient, retry.WithBackoff(retry.Constant(2*time.Minute)), retry.WithMaxDelay(time.Minute)))
	assert.Equal(t, []time.Duration{time.Minute, time.Minute},
		delaysOf(t, hinted, retry.WithMaxDelay(time.Minute)))
	assert.Equal(t, []time.Duration{2 * time.Hour},
		delaysOf(t, func() error { return retry.RetryAfter(errTransient, 2*time.Hour) }, retry.WithMaxDelay(3*time.Hour), retry.WithMaxAttempts(2)),
		"an explicit cap above the default lets a longer hint through")
}
