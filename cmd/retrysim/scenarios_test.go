package main

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrystats"
)

// The short versions of the scenarios, with the bounds that docs/overload.md
// states.

func TestContention_fullJitterHalvesTheCalls(t *testing.T) {
	p := defaultConfig(1).contention
	p.runs = 5
	res, err := runContention(p)
	require.NoError(t, err)
	none, full, equal, decorr := res.meanCalls(0), res.meanCalls(1), res.meanCalls(2), res.meanCalls(3)
	assert.LessOrEqual(t, full, 0.5*none, "full jitter: ≤ 0.5x the calls of no jitter")
	// Brooker's findings: full and equal jitter do about the same work,
	// decorrelated more, and no jitter takes by far the longest.
	assert.InDelta(t, 1, equal/full, 0.1)
	assert.Greater(t, decorr, full)
	for i := 1; i < len(strategies); i++ {
		assert.Less(t, res.meanDone(i), res.meanDone(0)/4, strategies[i].name)
	}
	for i := range strategies {
		for _, run := range res.runs[i] {
			assert.GreaterOrEqual(t, run.calls, p.clients, "every client wrote at least once")
		}
	}
	c := (&results{a: res}).checks()
	require.Len(t, c, 1)
	assert.True(t, c[0].ok)
}

// shortOutage is the outage scenario shortened for the tests: a 30 s
// outage in a minute.
func shortOutage() outageParams {
	p := defaultOutage(1)
	p.duration, p.outage = time.Minute, window{10 * time.Second, 40 * time.Second}
	return p
}

// outageRuns runs the short outage scenario with each variant.
func outageRuns(t *testing.T, variants ...protection) map[string]*outageRun {
	t.Helper()
	runs := map[string]*outageRun{}
	for _, v := range variants {
		o, err := runOutage(shortOutage(), v, scenarioB)
		require.NoError(t, err)
		runs[v.name] = o
	}
	return runs
}

func TestOutage_budgetsBoundTheLoad(t *testing.T) {
	runs := outageRuns(t, noBudget, tokenBucket, ratio)
	p := shortOutage()
	none, bucket, rat := runs[noBudget.name], runs[tokenBucket.name], runs[ratio.name]
	assert.Equal(t, int(p.rate*p.outage.length().Seconds()), none.offered())
	assert.InDelta(t, defaultAttempts, none.amplification(), 0.3, "no budget: ≈ max attempts x the offered load")
	assert.LessOrEqual(t, bucket.amplification(), 1.2, "token bucket: ≤ 1.2x the offered load")
	assert.LessOrEqual(t, rat.amplification(), 1.2, "ratio: ≤ 1.2x the offered load")
	// Before the outage every variant sends the offered load alone.
	before := window{0, p.outage.from}
	for _, o := range runs {
		assert.Equal(t, int(p.rate*before.length().Seconds()), o.attempts.sum(before), o.name)
	}
	// Without a budget the retries keep the downstream overloaded once it
	// is back; with one, calls succeed again at once.
	assert.Equal(t, "not recovered (20.0 s after it)", recoveryText(none))
	assert.Zero(t, bucket.calls.recovery(p.outage))
	assert.Zero(t, rat.calls.recovery(p.outage))
	assert.Positive(t, bucket.refilled, "the bucket, emptied by the outage, refills from successes")
}

func TestOutage_breakerShedsTheLoad(t *testing.T) {
	cfg := defaultConfig(1)
	cfg.scenarios, cfg.outage = "e", shortOutage()
	cfg.outage.duration = 50 * time.Second // the longest outage ends at 45.4 s
	cfg.outage.rate, cfg.outage.capacity = 100, 125
	res, err := simulate(cfg)
	require.NoError(t, err)
	g := res.byName(breaker)
	require.NotNil(t, g)
	assert.LessOrEqual(t, g.amplification(), 0.1)
	assert.Positive(t, g.calls.outcomes[retry.OutcomeRefused])
	// Calls fail after the outage until the gate's next probe, at most its
	// open period and a probe's timeout later.
	require.Len(t, res.phases, breakerPhases)
	assert.LessOrEqual(t, slices.Max(res.phases), cfg.outage.breakerTimeout+cfg.outage.timeout+time.Second)
	assert.Greater(t, slices.Max(res.phases), cfg.outage.breakerTimeout/2, "some outage ends early in the open period")
	for _, c := range res.checks() {
		assert.True(t, c.ok, c.bound)
	}
}

// What the simulation counts is what the library did, as retrystats sees
// it; watching the calls changes nothing of them.
func TestOutage_countsWhatTheLibraryDid(t *testing.T) {
	for _, v := range []protection{tokenBucket, breaker} {
		t.Run(v.name, func(t *testing.T) {
			plain, err := runOutage(shortOutage(), v, scenarioB)
			require.NoError(t, err)
			p := shortOutage()
			stats := new(retrystats.Stats)
			p.observer = stats
			watched, err := runOutage(p, v, scenarioB)
			require.NoError(t, err)
			assert.Equal(t, plain.attempts, watched.attempts)
			assert.Equal(t, plain.calls, watched.calls)

			snap := stats.Snapshot()
			assert.Equal(t, uint64(watched.calls.calls), snap.Calls())
			assert.Equal(t, uint64(watched.calls.succeeded), snap.Success)
			assert.Equal(t, uint64(watched.attempts.sum(window{0, time.Hour})), snap.Attempts)
			assert.Equal(t, uint64(watched.calls.outcomes[retry.OutcomeRefused]), snap.Refused)
			assert.Positive(t, snap.Refused)
			if v.name == breaker.name {
				assert.Equal(t, snap.Refused, snap.CircuitOpen)
			} else {
				assert.Equal(t, snap.Refused, snap.BudgetDenied)
			}
			assert.Zero(t, snap.InFlight)
			assert.Zero(t, snap.Waiting, "calls still waiting after every call returned (see TestBreaker_refusalAfterAWaitEndsTheWait)")
		})
	}
}

func TestRandomFailures_budgetsKeepTheSuccessRate(t *testing.T) {
	cfg := defaultConfig(1)
	cfg.scenarios = "c"
	cfg.failures.duration, cfg.failures.sweep = 40*time.Second, []float64{0.05, 0.3}
	res, err := simulate(cfg)
	require.NoError(t, err)
	at5 := res.failuresAt(0.05)
	require.Len(t, at5, len(budgets))
	assert.InDelta(t, 1-0.05*0.05*0.05, at5[0].successRate(), 0.001)
	for _, f := range at5[1:] {
		assert.InDelta(t, at5[0].successRate(), f.successRate(), 0.001, f.name)
	}
	for _, c := range res.checks() {
		assert.True(t, c.ok, c.bound)
	}
	// At 30 % the budgets refuse retries: fewer attempts per call, fewer
	// calls succeed.
	at30 := res.failuresAt(0.3)
	for _, f := range at30[1:] {
		assert.Positive(t, f.refused, f.name)
		assert.Less(t, f.perCall(), at30[0].perCall(), f.name)
		assert.Less(t, f.successRate(), at30[0].successRate(), f.name)
	}
}

func TestNested_oneLayerRetries(t *testing.T) {
	p := defaultNested(1)
	p.users = 10
	rule, err := runNested(p, false)
	require.NoError(t, err)
	nested, err := runNested(p, true)
	require.NoError(t, err)
	for i := range p.users {
		assert.Equal(t, 3, rule.leafCalls[i])
		assert.Equal(t, 27, nested.leafCalls[i])
		// With the rule the outer layers end at once, as the leaf's
		// Retrier did; without it each makes its 3 attempts.
		assert.Equal(t, retry.OutcomeExhausted, rule.outer[i].Outcome)
		assert.Equal(t, 1, rule.outer[i].Attempts)
		assert.Equal(t, retry.OutcomeExhausted, nested.outer[i].Outcome)
		assert.Equal(t, 3, nested.outer[i].Attempts)
	}
}

// The same seed gives the same results; another seed, others.
func TestSimulate_deterministic(t *testing.T) {
	cfg := defaultConfig(7)
	cfg.contention.runs, cfg.contention.clients = 2, 10
	cfg.failures.duration, cfg.failures.sweep = 10*time.Second, []float64{0.05, 0.2}
	cfg.outage.duration, cfg.outage.outage = 10*time.Second, window{2 * time.Second, 6 * time.Second}
	cfg.outage.rate, cfg.outage.capacity, cfg.failures.rate = 50, 62.5, 50
	cfg.nested.users = 3
	cfg.blip.rate, cfg.blip.steady, cfg.blip.after = 200, 11*time.Second, 2*time.Second
	cfg.tail.calls = 3000
	cfg.metastable.rate, cfg.metastable.capacity, cfg.metastable.dropped = 100, 125, 50
	cfg.metastable.trigger, cfg.metastable.duration = window{6 * time.Second, 11 * time.Second}, 20*time.Second
	cfg.metastable.settings = cfg.metastable.settings[:1]
	md := func(cfg config) string {
		res, err := simulate(cfg)
		require.NoError(t, err)
		return res.markdown()
	}
	first := md(cfg)
	assert.Equal(t, first, md(cfg))
	cfg.seed = 8
	cfg.contention.seed, cfg.outage.seed, cfg.failures.seed, cfg.nested.seed, cfg.blip.seed, cfg.tail.seed, cfg.metastable.seed = 8, 8, 8, 8, 8, 8, 8
	assert.NotEqual(t, first, md(cfg))
}

// Scenario g alone, the same seed twice: the same latencies of every call
// and the same downstream calls, whatever order the Go scheduler ran the
// hedges' goroutines in; and the simulation's hedges are the library's.
func TestTail_deterministic(t *testing.T) {
	p := defaultTail(3)
	p.calls = 3000
	for _, h := range p.variants() {
		a, err := runTail(p, h)
		require.NoError(t, err)
		b, err := runTail(p, h)
		require.NoError(t, err)
		assert.Equal(t, a, b, h.name)
	}
	o := shortOutage()
	o.duration, o.outage = 20*time.Second, window{5 * time.Second, 15 * time.Second}
	for _, v := range p.outageVariants() {
		a, err := runOutage(o, v, scenarioB)
		require.NoError(t, err)
		b, err := runOutage(o, v, scenarioB)
		require.NoError(t, err)
		assert.Equal(t, a.attempts, b.attempts, v.name)
		assert.Equal(t, a.calls, b.calls, v.name)
	}
}

// TestTail_hedgingCutsTheTail is scenario g, shortened: 6,000 calls (30 s),
// and the outage of the short b. The adaptive delay cuts p99.9 by 10x or
// more for at most tailMaxExtra more downstream calls; in the outage,
// hedging leaves the load within 1 % of what it is without.
func TestTail_hedgingCutsTheTail(t *testing.T) {
	cfg := defaultConfig(1)
	cfg.scenarios, cfg.outage = "g", shortOutage()
	cfg.tail.calls = 6000
	res, err := simulate(cfg)
	require.NoError(t, err)
	g := res.g
	require.NotNil(t, g)
	require.Len(t, g.runs, 3)
	none, fixed, adaptive := g.runs[0], g.runs[1], g.runs[2]
	for _, r := range g.runs {
		assert.Zero(t, r.failed, r.name)
		assert.Len(t, r.latencies, cfg.tail.calls, r.name)
		assert.Equal(t, none.percentile(0.5), r.percentile(0.5), "%s: hedging leaves the median alone", r.name)
	}
	assert.Equal(t, time.Second, none.percentile(0.999), "without hedging p99.9 is the slow attempt")
	assert.Zero(t, none.extraLoad())
	assert.LessOrEqual(t, 10*adaptive.percentile(0.999), none.percentile(0.999), "adaptive: p99.9 ≥ 10x lower")
	assert.LessOrEqual(t, adaptive.extraLoad(), tailMaxExtra, "adaptive: extra downstream calls")
	assert.Greater(t, adaptive.extraLoad(), 0.02, "the adaptive delay hedges about 3 % of calls")
	assert.LessOrEqual(t, 10*fixed.percentile(0.999), none.percentile(0.999), "fixed: p99.9 ≥ 10x lower")
	assert.InDelta(t, cfg.tail.slowP, fixed.extraLoad(), 0.005, "the fixed delay hedges the slow attempts alone")
	require.Len(t, g.outage, 3)
	for _, o := range g.outage[1:] {
		assert.InDelta(t, 0, g.loadChange(o), 0.01, o.name)
	}
	checks := res.checks()
	require.Len(t, checks, 4)
	for _, c := range checks {
		assert.Equal(t, "g", c.scenario)
		assert.True(t, c.ok, c.bound)
	}
}

// TestBlip_defaultBudgetRetriesIt is scenario f, shortened: 15 s of
// steady traffic (more than the ratio budget's 10 s window), the blip, 5 s
// after. The default budget (the ratio budget) lets at least 99 % of the
// calls that met the blip succeed, as no budget does, at 1.5 attempts per
// call then; the old default, a token bucket of 100, did not.
func TestBlip_defaultBudgetRetriesIt(t *testing.T) {
	cfg := defaultConfig(1)
	cfg.scenarios = "f"
	cfg.blip.steady, cfg.blip.after = 15*time.Second, 5*time.Second
	res, err := simulate(cfg)
	require.NoError(t, err)
	p := cfg.blip
	none, bucket, rat := res.blipByName(noBudget), res.blipByName(tokenBucket), res.blipByName(ratio)
	assert.Equal(t, 1.0, blipSuccess(none, p))
	assert.GreaterOrEqual(t, blipSuccess(rat, p), 0.99, "the default budget retries a blip")
	assert.Less(t, blipSuccess(bucket, p), 0.1, "a token bucket of 100 does not scale with the traffic")
	assert.InDelta(t, 1.5, blipLoad(none, p), 0.05, "each call that met the blip made one retry")
	assert.InDelta(t, blipLoad(none, p), blipLoad(rat, p), 0.02)
	for _, c := range res.checks() {
		assert.True(t, c.ok, c.bound)
	}
}
