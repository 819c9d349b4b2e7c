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
// after a reset sees 5.5x the limit; with the pause, under 1 % and at
// most limitedPauseSpike x, none sent before the time a 429 named, for
// the same goodput. The rate beside the pause refuses calls itself.
func TestRateLimited_pauseEndsThe429sAndTheSpike(t *testing.T) {
	p := shortLimited()
	runs, err := runLimiteds(p)
	require.NoError(t, err)
	require.Len(t, runs, len(limitedVariants))
	none, paused := limitedByName(runs, limitedVariants[0]), limitedByName(runs, limitedVariants[1])
	assert.GreaterOrEqual(t, none.tooManyShare(), limitedNoneTooMany, "without the pause: many 429s")
	assert.GreaterOrEqual(t, p.times(float64(none.spike())), float64(limitedNoneSpike), "without the pause: a spike after a reset")
	assert.Positive(t, none.early, "each call honours its own Retry-After alone")
	assert.Less(t, paused.tooManyShare(), limitedPauseTooMany)
	assert.LessOrEqual(t, p.times(float64(paused.spike())), limitedPauseSpike)
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
	checks := (&results{i: runs}).checks()
	require.Len(t, checks, 6)
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
			if v.pause {
				t.Skip("overload.Pause draws its share of Spread from math/rand/v2's global source, which no seed reaches")
			}
			a, err := runLimited(p, v)
			require.NoError(t, err)
			b, err := runLimited(p, v)
			require.NoError(t, err)
			assert.Equal(t, a, b)
		})
	}
}
