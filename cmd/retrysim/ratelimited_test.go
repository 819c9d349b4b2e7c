package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shortLimited is scenario i shortened for the tests: 60 s, six resets.
func shortLimited() limitedParams {
	p := defaultLimited(1)
	p.duration = 60 * time.Second
	return p
}

// TestRateLimited_pauseEndsThe429sAndTheSpike is scenario i, shortened.
// Without a shared pause a third of the requests are 429s and the second
// after a reset sees 5.5x the limit, nearly all retries; with the pause
// under 1 % are, next to no retries follow a reset and its second sees
// at most limitedPauseSpike x, none is sent before the time a 429 named,
// for the same goodput. A rate beside the pause refuses calls itself,
// and with a small burst keeps the load at the limit.
func TestRateLimited_pauseEndsThe429sAndTheSpike(t *testing.T) {
	p := shortLimited()
	runs, err := runLimiteds(p)
	require.NoError(t, err)
	require.Len(t, runs, len(limitedVariants))
	none, paused := limitedByName(runs, limitedVariants[0]), limitedByName(runs, limitedVariants[1])
	assert.GreaterOrEqual(t, none.tooManyShare(), limitedNoneTooMany, "without the pause: many 429s")
	assert.GreaterOrEqual(t, p.times(float64(none.quietest())), float64(limitedNoneSpike), "without the pause: a spike after every reset")
	assert.Positive(t, none.early, "each call honours its own Retry-After alone")
	assert.GreaterOrEqual(t, p.times(float64(none.retrySpike())), float64(limitedNoneSpike), "without the pause: the spike is retries")
	assert.Less(t, paused.tooManyShare(), limitedPauseTooMany)
	assert.LessOrEqual(t, p.times(float64(paused.retrySpike())), limitedPauseRetries)
	assert.LessOrEqual(t, p.times(float64(paused.spike())), float64(limitedPauseSpike))
	assert.InDelta(t, none.goodputRate(), paused.goodputRate(), 0.01*none.goodputRate())
	assert.InDelta(t, p.perSecond, none.goodputRate(), 0.01*p.perSecond, "the clients use the whole quota")
	for _, r := range runs[:2] {
		assert.Zero(t, r.failedCalls(), "%s: with no deadline and 5 attempts, every call gets through", r.name)
	}
	for _, r := range runs[1:] {
		assert.Zero(t, r.early, "%s: no request before the time a 429 named", r.name)
		assert.Less(t, r.tooManyShare(), limitedPauseTooMany, r.name)
	}
	for _, r := range runs[2:] {
		assert.Positive(t, r.failed[failedRate], "%s: a rate never waits; it refuses the calls beyond it", r.name)
		assert.Equal(t, r.failed[failedRate], r.failedCalls(), r.name)
	}
	small := limitedByName(runs, limitedVariants[3])
	assert.LessOrEqual(t, p.times(float64(small.busiest())), 1.2, "a rate with a burst of 0.1 s: no second above 1.2x the limit")
	checks := (&results{i: runs}).checks()
	require.Len(t, checks, 7)
	for _, c := range checks {
		assert.Equal(t, "i", c.scenario)
		assert.True(t, c.ok, "%s: %s", c.bound, c.measured)
	}
}

// TestRateLimited_sameSeed: the same seed gives the same run.
func TestRateLimited_sameSeed(t *testing.T) {
	p := shortLimited()
	p.duration = 20 * time.Second
	for _, v := range limitedVariants {
		t.Run(v.name, func(t *testing.T) {
			a, err := runLimited(p, v)
			require.NoError(t, err)
			b, err := runLimited(p, v)
			require.NoError(t, err)
			assert.Equal(t, a, b)
		})
	}
}
