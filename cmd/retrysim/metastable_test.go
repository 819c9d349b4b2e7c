package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shortMetastable is scenario h shortened for the tests: half the rates
// (400 calls/s on a downstream of 500 attempts/s, 250 in the trigger),
// the trigger at 10–20 s of a 45 s run, long enough to see a recovery
// at the bound, and no other settings.
func shortMetastable() metastableParams {
	p := defaultMetastable(1)
	p.rate, p.capacity, p.dropped = 400, 500, 250
	p.trigger, p.duration = window{10 * time.Second, 20 * time.Second}, 45*time.Second
	p.settings = nil
	return p
}

// TestMetastable_protectionEndsIt is scenario h, shortened. Without
// protection the system stays down to the run's end, 25 s after the
// trigger, at three times the load; with New's default budget it
// recovers within twice the trigger's length, and with the limit, alone
// or with the budget, at least as fast.
func TestMetastable_protectionEndsIt(t *testing.T) {
	cfg := defaultConfig(1)
	cfg.scenarios, cfg.metastable = "h", shortMetastable()
	res, err := simulate(cfg)
	require.NoError(t, err)
	h := res.h
	require.NotNil(t, h)
	require.Len(t, h.runs, len(guards))
	p := cfg.metastable
	for _, r := range h.runs {
		assert.Equal(t, p.rate, r.before(), "%s: before the trigger every call succeeds", r.name)
		assert.Equal(t, int(p.rate*p.steady().length().Seconds()), r.attempts.sum(p.steady()), "%s: at one attempt", r.name)
	}
	none, budget := h.byGuard(guards[0]), h.byGuard(guards[1])
	_, recovered := none.recovery()
	assert.False(t, recovered, "no protection: metastable")
	assert.Zero(t, none.goodput(p.tail()))
	tailLoad := float64(none.attempts.sum(p.tail())) / p.tail().length().Seconds()
	assert.InDelta(t, defaultAttempts*p.rate, tailLoad, 0.05*defaultAttempts*p.rate, "every call makes all its attempts")
	assert.Greater(t, none.longestWait(), p.after().length(), "the queue grows after the trigger")
	rec, recovered := budget.recovery()
	require.True(t, recovered, "the default budget")
	assert.LessOrEqual(t, rec, 2*p.trigger.length())
	assert.Positive(t, rec, "the queue left by the trigger takes time to drain")
	for _, g := range guards[2:] {
		r := h.byGuard(g)
		lrec, recovered := r.recovery()
		require.True(t, recovered, r.name)
		assert.LessOrEqual(t, lrec, rec, r.name)
		assert.LessOrEqual(t, r.peakLoad(), int(p.capacity), "%s: the downstream never sees more than it can serve", r.name)
		assert.Less(t, r.longestWait(), p.timeout, "%s: no attempt waits out its timeout", r.name)
		assert.Positive(t, r.refused, "%s: the limit sheds calls in the trigger", r.name)
	}
	checks := res.checks()
	require.Len(t, checks, 4)
	for _, c := range checks {
		assert.Equal(t, "h", c.scenario)
		assert.True(t, c.ok, c.bound)
	}
}
