package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/steadfast-go/retry"
)

// results holds the runs of the scenarios chosen; a scenario not run is
// nil.
type results struct {
	cfg    config
	a      *contentionResult
	outage []*outageRun     // b's variants, then e's gate (b and e share the no-budget run)
	c      [][]*failuresRun // [i][j]: budgets[j] at failure rate cfg.failures.sweep[i]
	d      []*nestedRun
	phases []time.Duration // e: how long calls failed after outages longer by k/breakerPhases of the breaker's cycle
	f      []*outageRun    // blipVariants' runs
	g      *tailResult
	h      *metastableResult
	i      []*limitedRun // limitedVariants' runs
}

// blipByName finds a run of scenario f.
func (r *results) blipByName(p protection) *outageRun { return runOf(r.f, p) }

// runOf finds p's run among runs, or nil.
func runOf(runs []*outageRun, p protection) *outageRun {
	for _, o := range runs {
		if o.name == p.name {
			return o
		}
	}
	return nil
}

// breakerPhases is how many outages of lengths spread over one cycle of
// the breaker scenario e runs.
const breakerPhases = 10

// byName finds an outage run.
func (r *results) byName(p protection) *outageRun { return runOf(r.outage, p) }

// check is one bound the scenarios must meet.
type check struct {
	scenario string
	bound    string
	measured string
	ok       bool
	skipped  string // why the bound does not apply to these parameters
}

// label is the verdict in a word or two.
func (c check) label() string {
	switch {
	case c.skipped != "":
		return "n/a"
	case c.ok:
		return "met"
	}
	return "NOT met"
}

// verdict is the verdict for the table.
func (c check) verdict() string {
	switch {
	case c.skipped != "":
		return "n/a: " + c.skipped
	case c.ok:
		return "met"
	}
	return "**NOT met**"
}

// checks are the bounds of the scenarios that ran.
func (r *results) checks() []check {
	var cs []check
	if a := r.a; a != nil {
		none, full := a.meanCalls(0), a.meanCalls(1)
		c := check{scenario: "a", bound: "full jitter makes ≤ 0.5x the calls of no jitter",
			measured: fmt.Sprintf("%.2fx (%.1f / %.1f)", full/none, full, none), ok: full <= 0.5*none}
		if a.params.clients < 100 {
			c.skipped = "the bound is for 100 clients or more"
		}
		cs = append(cs, c)
	}
	if nb := r.byName(noBudget); nb != nil && r.byName(tokenBucket) != nil {
		attempts := float64(defaultAttempts)
		cs = append(cs, check{scenario: "b", bound: fmt.Sprintf("no budget: ≈ %dx the offered load during the outage (within 10 %%)", defaultAttempts),
			measured: fmt.Sprintf("%.2fx", nb.amplification()), ok: math.Abs(nb.amplification()-attempts) <= 0.1*attempts})
		for _, p := range []protection{tokenBucket, ratio} {
			o := r.byName(p)
			cs = append(cs, check{scenario: "b", bound: p.name + ": ≤ 1.2x the offered load during the outage",
				measured: fmt.Sprintf("%.3fx", o.amplification()), ok: o.amplification() <= 1.2})
		}
	}
	if c := r.failuresAt(r.cfg.failures.failP); c != nil {
		base := c[0].successRate()
		for _, f := range c[1:] {
			diff := 100 * (f.successRate() - base)
			cs = append(cs, check{scenario: "c", bound: f.name + ": success rate within 0.1 percentage points of no budget",
				measured: fmt.Sprintf("%+.4f points", diff), ok: math.Abs(diff) <= 0.1})
		}
	}
	if r.d != nil {
		p := r.cfg.nested
		want := []float64{float64(p.attempts), math.Pow(float64(p.attempts), float64(p.layers))}
		for i, d := range r.d {
			cs = append(cs, check{scenario: "d", bound: fmt.Sprintf("%s: %.0f leaf calls per user call", d.name, want[i]),
				measured: fmt.Sprintf("%.2f", d.perUser()), ok: d.perUser() == want[i]})
		}
	}
	if g := r.byName(breaker); g != nil {
		p := g.params
		cs = append(cs, check{scenario: "e", bound: "gobreaker: ≤ 0.1x the offered load during the outage",
			measured: fmt.Sprintf("%.3fx", g.amplification()), ok: g.amplification() <= 0.1})
		limit := p.breakerTimeout + p.timeout + time.Second
		worst := slices.Max(append([]time.Duration{g.calls.recovery(p.outage)}, r.phases...))
		cs = append(cs, check{scenario: "e", bound: fmt.Sprintf("gobreaker: calls fail for at most %s after the outage (its open period, a probe's timeout and a second), over %d outage lengths", seconds(limit), max(len(r.phases), 1)),
			measured: "at most " + seconds(worst), ok: worst <= limit})
	}
	if r.f != nil {
		p := r.cfg.blip
		for _, v := range []protection{noBudget, ratio} {
			o := r.blipByName(v)
			cs = append(cs, check{scenario: "f", bound: o.name + ": ≥ 99 % of the calls that meet the blip succeed",
				measured: fmt.Sprintf("%.2f %%", 100*blipSuccess(o, p)), ok: blipSuccess(o, p) >= 0.99})
		}
	}
	if g := r.g; g != nil {
		none, adaptive := g.runs[0], g.runs[len(g.runs)-1]
		gain := float64(none.percentile(0.999)) / float64(adaptive.percentile(0.999))
		cs = append(cs, check{scenario: "g", bound: "adaptive delay: p99.9 ≥ 10x lower than no hedging",
			measured: fmt.Sprintf("%.1fx lower (%s against %s)", gain, latencyText(adaptive.percentile(0.999)), latencyText(none.percentile(0.999))), ok: gain >= 10})
		cs = append(cs, check{scenario: "g", bound: fmt.Sprintf("adaptive delay: ≤ %g %% more downstream calls than calls", 100*tailMaxExtra),
			measured: fmt.Sprintf("%+.2f %%", 100*adaptive.extraLoad()), ok: adaptive.extraLoad() <= tailMaxExtra})
		for _, o := range g.outage[1:] {
			change := g.loadChange(o)
			cs = append(cs, check{scenario: "g", bound: "outage of b, " + strings.TrimPrefix(o.name, ratio.name+", ") + ": the downstream load within 1 % of no hedging",
				measured: fmt.Sprintf("%+.2f %% (%.3fx against %.3fx)", 100*change, o.amplification(), g.outage[0].amplification()), ok: math.Abs(change) <= 0.01})
		}
	}
	if h := r.h; h != nil {
		cs = append(cs, h.checks()...)
	}
	if r.i != nil {
		cs = append(cs, limitedChecks(r.i)...)
	}
	return cs
}

// limitedChecks are scenario i's bounds: without a shared pause many
// 429s and a spike well above the limit after a reset; with it few 429s,
// next to no retries after a reset and a load near the limit, no
// request sent before the time a 429 named, and the goodput of no pause.
func limitedChecks(runs []*limitedRun) []check {
	none, paused := limitedByName(runs, limitedVariants[0]), limitedByName(runs, limitedVariants[1])
	p := none.params
	return []check{
		{scenario: "i", bound: fmt.Sprintf("%s: ≥ %g %% of the requests answered 429", none.name, 100*limitedNoneTooMany),
			measured: fmt.Sprintf("%.2f %% (%d of %d)", 100*none.tooManyShare(), none.tooMany(), none.requests()), ok: none.tooManyShare() >= limitedNoneTooMany},
		{scenario: "i", bound: fmt.Sprintf("%s: the second after every reset sees ≥ %gx the limit", none.name, float64(limitedNoneSpike)),
			measured: fmt.Sprintf("at least %.2fx (%d requests)", p.times(float64(none.quietest())), none.quietest()), ok: p.times(float64(none.quietest())) >= limitedNoneSpike},
		{scenario: "i", bound: fmt.Sprintf("%s: < %g %% of the requests answered 429", paused.name, 100*limitedPauseTooMany),
			measured: fmt.Sprintf("%.2f %% (%d of %d)", 100*paused.tooManyShare(), paused.tooMany(), paused.requests()), ok: paused.tooManyShare() < limitedPauseTooMany},
		{scenario: "i", bound: fmt.Sprintf("%s: retries in the second after every reset ≤ %gx the limit", paused.name, limitedPauseRetries),
			measured: fmt.Sprintf("at most %.3fx (%d; %d without the pause)", p.times(float64(paused.retrySpike())), paused.retrySpike(), none.retrySpike()), ok: p.times(float64(paused.retrySpike())) <= limitedPauseRetries},
		{scenario: "i", bound: fmt.Sprintf("%s: the second after every reset sees ≤ %gx the limit", paused.name, float64(limitedPauseSpike)),
			measured: fmt.Sprintf("at most %.2fx (%d requests)", p.times(float64(paused.spike())), paused.spike()), ok: p.times(float64(paused.spike())) <= limitedPauseSpike},
		{scenario: "i", bound: paused.name + ": no request sent before the time a 429 named",
			measured: fmt.Sprintf("%d (%d without the pause)", paused.early, none.early), ok: paused.early == 0},
		{scenario: "i", bound: paused.name + ": goodput within 1 % of no shared pause's",
			measured: fmt.Sprintf("%.1f against %.1f calls/s", paused.goodputRate(), none.goodputRate()), ok: math.Abs(paused.goodputRate()-none.goodputRate()) <= 0.01*none.goodputRate()},
	}
}

// checks are scenario h's bounds: without protection the system stays
// down after the trigger; with New's default budget it recovers within
// twice the trigger's length, and with the limit, alone or beside the
// budget, at least as fast as with the budget alone.
func (m *metastableResult) checks() []check {
	p := m.params
	none, budget := m.byGuard(guards[0]), m.byGuard(guards[1])
	_, noneOK := none.recovery()
	tail := none.goodput(p.tail()) / none.before()
	cs := []check{{scenario: "h", bound: fmt.Sprintf("%s: does not recover in the %s after the trigger, and its goodput in the run's last %s is below %g %% of before (metastable)", none.name, seconds(p.after().length()), span(p.tail().length()), 100*metastableDown),
		measured: fmt.Sprintf("%s; %.1f %% of before", none.recoveryText(), 100*tail), ok: !noneOK && tail < metastableDown}}
	bound := 2 * p.trigger.length()
	rec, ok := budget.recovery()
	cs = append(cs, check{scenario: "h", bound: fmt.Sprintf("%s: recovers within %s of the trigger's end (twice its length)", budget.name, seconds(bound)),
		measured: budget.recoveryText(), ok: ok && rec <= bound})
	for _, g := range guards[2:] {
		o := m.byGuard(g)
		orec, ook := o.recovery()
		cs = append(cs, check{scenario: "h", bound: o.name + ": recovers at least as fast as the ratio budget alone",
			measured: fmt.Sprintf("%s against %s", o.recoveryText(), budget.recoveryText()), ok: ook && (!ok || orec <= rec)})
	}
	return cs
}

// metastableDown is the share of its goodput before the trigger below
// which scenario h's system without protection is down.
const metastableDown = 0.1

// tailMaxExtra is scenario g's bound on the adaptive delay's extra
// downstream calls, as the hedging issue set it: the default delay, the
// 97th percentile of the Retrier's latest first attempts, hedges about 3 %
// of calls.
const tailMaxExtra = 0.05

// defaultAttempts is the library's default number of attempts, which
// the outage scenarios keep.
const defaultAttempts = 3

// recovered is how long calls kept failing after the outage, and false
// if they still failed in the run's last 2 s: the downstream did not
// recover within the run.
func (r *outageRun) recovered() (time.Duration, bool) {
	rec := r.calls.recovery(r.params.outage)
	return rec, rec < r.params.duration-r.params.outage.to-2*time.Second
}

// recoveryText says how long calls kept failing after the outage, for a
// table.
func recoveryText(r *outageRun) string {
	if rec, ok := r.recovered(); ok {
		return seconds(rec)
	}
	return fmt.Sprintf("not recovered (%s after it)", seconds(r.params.duration-r.params.outage.to))
}

// recoverySentence says it for a sentence.
func recoverySentence(r *outageRun) string {
	switch rec, ok := r.recovered(); {
	case !ok:
		return fmt.Sprintf("kept failing to the end of the run, %s later", seconds(r.params.duration-r.params.outage.to))
	case rec == 0:
		return "succeeded at once"
	default:
		return "kept failing for " + seconds(rec)
	}
}

// firstRefusals names, for each budget, the lowest failure rate of the
// sweep at which it refused retries.
func (r *results) firstRefusals() string {
	var parts []string
	for j, v := range budgets[1:] {
		for i, rate := range r.cfg.failures.sweep {
			if r.c[i][j+1].refused > 0 {
				parts = append(parts, fmt.Sprintf("the %s from %g %%", v.name, 100*rate))
				break
			}
		}
	}
	if len(parts) == 0 {
		return "No budget refused a retry at any rate run."
	}
	return "The budgets refused retries at higher rates: " + strings.Join(parts, ", ") + "."
}

// The Markdown of each scenario, for results.md and the blocks of the
// documentation.

func (r *results) markdownA() string {
	a := r.a
	var b strings.Builder
	fmt.Fprintf(&b, "Full jitter made %.2fx the calls of no jitter and finished in %.2fx its time; equal jitter made %.2fx the calls, decorrelated jitter %.2fx.\n\n",
		a.meanCalls(1)/a.meanCalls(0), float64(a.meanDone(1))/float64(a.meanDone(0)), a.meanCalls(2)/a.meanCalls(0), a.meanCalls(3)/a.meanCalls(0))
	fmt.Fprintf(&b, "%d clients, %d runs, base %s, cap %s; means over the runs.\n\n", a.params.clients, a.params.runs, span(a.params.base), span(a.params.cap))
	b.WriteString("| Strategy | Calls | × no jitter | Time to completion | × no jitter |\n| --- | ---: | ---: | ---: | ---: |\n")
	none, noneT := a.meanCalls(0), a.meanDone(0)
	for i, st := range strategies {
		fmt.Fprintf(&b, "| %s | %.1f | %.2f | %s | %.2f |\n", st.name, a.meanCalls(i), a.meanCalls(i)/none,
			millis(a.meanDone(i)), float64(a.meanDone(i))/float64(noneT))
	}
	return b.String()
}

func (r *results) markdownB() string {
	var b strings.Builder
	p := r.outage[0].params
	nb, tb, ra := r.byName(noBudget), r.byName(tokenBucket), r.byName(ratio)
	fmt.Fprintf(&b, "During the outage the downstream saw %.2fx the offered load without a budget, %.3fx with the token bucket and %.3fx with the ratio budget. Once it was back, calls without a budget %s; with the token bucket they %s, and with the ratio budget they %s.\n\n",
		nb.amplification(), tb.amplification(), ra.amplification(), recoverySentence(nb), recoverySentence(tb), recoverySentence(ra))
	fmt.Fprintf(&b, "%.0f calls/s for %s, outage %s, the downstream serving %.0f attempts/s, attempt timeout %s.\n\n",
		p.rate, span(p.duration), spanLabel(p.outage), p.capacity, span(p.timeout))
	b.WriteString("| Variant | Attempts/s in the outage | × offered load | Peak second | Calls that succeeded | Calls fail after the outage for |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, v := range []protection{noBudget, tokenBucket, ratio} {
		o := r.byName(v)
		if o == nil {
			continue
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.3f | %d | %.2f %% | %s |\n", o.name, o.meanRate(), o.amplification(),
			o.peakRate(), 100*o.successRate(), recoveryText(o))
	}
	if tb := r.byName(tokenBucket); tb != nil && tb.refilled >= 0 {
		fmt.Fprintf(&b, "\nThe token bucket allowed no retry until %s after the outage, when its successes had filled it above half again.\n", seconds(tb.refilled))
	}
	return b.String()
}

// failuresAt is scenario c's runs at failure rate p, one per budget.
func (r *results) failuresAt(p float64) []*failuresRun {
	for i, f := range r.cfg.failures.sweep {
		if f == p && i < len(r.c) {
			return r.c[i]
		}
	}
	return nil
}

func (r *results) markdownC() string {
	var b strings.Builder
	p := r.cfg.failures
	at := r.failuresAt(p.failP)
	base := at[0].successRate()
	worst := 0.0
	for _, f := range at[1:] {
		worst = max(worst, math.Abs(100*(f.successRate()-base)))
	}
	fmt.Fprintf(&b, "With %g %% of attempts failing, each budget's success rate was within %.4f percentage points of no budget's. %s\n\n",
		100*p.failP, worst, r.firstRefusals())
	fmt.Fprintf(&b, "%.0f calls/s for %s, %g %% of attempts failing at random.\n\n", p.rate, span(p.duration), 100*p.failP)
	b.WriteString("| Variant | Calls | Succeeded | Success rate | Δ vs no budget | Attempts per call | Refused by the budget |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, f := range at {
		fmt.Fprintf(&b, "| %s | %d | %d | %.4f %% | %+.4f points | %.4f | %d |\n", f.name, f.calls.calls, f.calls.succeeded,
			100*f.successRate(), 100*(f.successRate()-base), f.perCall(), f.refused)
	}
	b.WriteString("\nThe same load at other failure rates: success rate, and attempts per call.\n\n| Attempts failing |")
	for _, v := range budgets {
		fmt.Fprintf(&b, " %s |", v.name)
	}
	b.WriteString("\n| ---: |" + strings.Repeat(" ---: |", len(budgets)) + "\n")
	for i, rate := range p.sweep {
		fmt.Fprintf(&b, "| %g %% |", 100*rate)
		for _, f := range r.c[i] {
			fmt.Fprintf(&b, " %.2f %%, %.3f |", 100*f.successRate(), f.perCall())
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (r *results) markdownD() string {
	var b strings.Builder
	p := r.cfg.nested
	fmt.Fprintf(&b, "A user call reached the leaf %.0f times with the one-layer rule and %.0f times without it.\n\n", r.d[0].perUser(), r.d[len(r.d)-1].perUser())
	fmt.Fprintf(&b, "%d layers of %d attempts, no budgets, %d user calls while the leaf is down.\n\n", p.layers, p.attempts, p.users)
	b.WriteString("| Variant | Leaf calls per user call |\n| --- | ---: |\n")
	for _, d := range r.d {
		fmt.Fprintf(&b, "| %s | %.2f |\n", d.name, d.perUser())
	}
	return b.String()
}

func (r *results) markdownE() string {
	var b strings.Builder
	g := r.byName(breaker)
	p := g.params
	var sum time.Duration
	for _, d := range r.phases {
		sum += d
	}
	fmt.Fprintf(&b, "With the gate the downstream saw %.3fx the offered load during the outage, without it %.2fx; the gate refused %d calls at once. Once the downstream was back, calls kept failing until the gate's next probe: for %s in the run charted, and over %d outages whose lengths are a tenth of the gate's cycle (its open period and a probe's timeout) apart, the first as charted, for %s on average and at most %s.\n\n",
		g.amplification(), r.byName(noBudget).amplification(), g.calls.outcomes[retry.OutcomeRefused], seconds(g.calls.recovery(p.outage)),
		len(r.phases), seconds(sum/time.Duration(max(len(r.phases), 1))), seconds(slices.Max(append([]time.Duration{0}, r.phases...))))
	fmt.Fprintf(&b, "The outage of scenario b; the gate opens after more than 5 consecutive failures, for %s, then lets one probe through.\n\n", span(p.breakerTimeout))
	b.WriteString("| Variant | Attempts/s in the outage | × offered load | Calls refused by the breaker | Calls that succeeded | Calls fail after the outage for |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, v := range []protection{noBudget, breaker} {
		o := r.byName(v)
		fmt.Fprintf(&b, "| %s | %.1f | %.3f | %d | %.2f %% | %s |\n", o.name, o.meanRate(), o.amplification(),
			o.calls.outcomes[retry.OutcomeRefused], 100*o.successRate(), recoveryText(o))
	}
	return b.String()
}

func (r *results) markdownF() string {
	var b strings.Builder
	p := r.cfg.blip
	fmt.Fprintf(&b, "%.0f calls/s on a healthy downstream for %s, then for 1 s (%s) each call's first attempt that reaches it fails at once and its retry is served, then healthy for %s; latency %s.\n\n",
		p.rate, span(p.steady), spanLabel(p.blip()), span(p.after), span(p.latency))
	b.WriteString("| Variant | Calls that met the blip and succeeded | Calls refused a retry | Attempts per call, blip and the second after | Attempts per call, whole run |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, v := range blipVariants {
		o := r.blipByName(v)
		whole := float64(o.attempts.sum(window{0, p.duration()})) / float64(o.calls.calls)
		fmt.Fprintf(&b, "| %s | %.2f %% | %d | %.3f | %.4f |\n", o.name, 100*blipSuccess(o, p), o.calls.outcomes[retry.OutcomeRefused], blipLoad(o, p), whole)
	}
	return b.String()
}

func (r *results) markdownG() string {
	var b strings.Builder
	g := r.g
	p := g.params
	none, fixed, adaptive := g.runs[0], g.runs[1], g.runs[2]
	fmt.Fprintf(&b, "Without hedging, p99.9 was %s; with the fixed delay %s (%.0fx lower) for %+.2f %% downstream calls, with the adaptive delay %s (%.0fx lower) for %+.2f %%. In the outage of b, hedging changed the downstream's load by %s.\n\n",
		latencyText(none.percentile(0.999)), latencyText(fixed.percentile(0.999)), float64(none.percentile(0.999))/float64(fixed.percentile(0.999)), 100*fixed.extraLoad(),
		latencyText(adaptive.percentile(0.999)), float64(none.percentile(0.999))/float64(adaptive.percentile(0.999)), 100*adaptive.extraLoad(), g.outageChanges())
	fmt.Fprintf(&b, "%d calls at %.0f calls/s; each attempt takes %s to %s (uniform) or, with probability %g %%, %s; New's defaults (3 attempts, the ratio budget).\n\n",
		p.calls, p.rate, span(p.fastMin), span(p.fastMax), 100*p.slowP, span(p.slow))
	b.WriteString("| Variant | p50 | p99 | p99.9 | Slowest call | Downstream calls per call | Extra load |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, t := range g.runs {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.4f | %+.2f %% |\n", t.name, latencyText(t.percentile(0.5)), latencyText(t.percentile(0.99)),
			latencyText(t.percentile(0.999)), latencyText(t.latencies[len(t.latencies)-1]), 1+t.extraLoad(), 100*t.extraLoad())
	}
	b.WriteString("\nThe outage of b (the ratio budget, New's default):\n\n| Variant | Attempts/s in the outage | × offered load | Δ vs no hedging | Peak second | Calls that succeeded |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for i, o := range g.outage {
		delta := "–"
		if i > 0 {
			delta = fmt.Sprintf("%+.2f %%", 100*g.loadChange(o))
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.3f | %s | %d | %.2f %% |\n", o.name, o.meanRate(), o.amplification(), delta, o.peakRate(), 100*o.successRate())
	}
	return b.String()
}

func (r *results) markdownH() string {
	var b strings.Builder
	h := r.h
	p := h.params
	none, budget, limit, both := h.byGuard(guards[0]), h.byGuard(guards[1]), h.byGuard(guards[2]), h.byGuard(guards[3])
	fmt.Fprintf(&b, "Without protection goodput %s: in the run's last %s it was %.1f %% of its level before the trigger. With the ratio budget it %s; with the adaptive limit it %s, and with both it %s.\n\n",
		none.recoverySentence(), span(p.tail().length()), 100*none.goodput(p.tail())/none.before(), budget.recoverySentence(), limit.recoverySentence(), both.recoverySentence())
	fmt.Fprintf(&b, "%.0f calls/s for %s on a downstream that serves %.0f attempts/s from its queue, and %.0f attempts/s in the trigger (%s); attempt timeout %s, network latency %s; recovered: goodput at least %g %% of its level before the trigger (%s) for %d seconds in a row.\n\n",
		p.rate, span(p.duration), p.capacity, p.dropped, spanLabel(p.trigger), span(p.timeout), span(p.latency), 100*recoveredShare, spanLabel(p.steady()), recoveredFor)
	fmt.Fprintf(&b, "| Variant | Goodput before (calls/s) | Goodput in the trigger | Recovered after the trigger in | Goodput, last %s | Peak load (attempts/s) | × capacity | Longest queue wait | Calls that succeeded | Attempts refused by the limit |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n", span(p.tail().length()))
	for _, o := range h.runs {
		refused := "–"
		if o.limits != nil {
			refused = fmt.Sprint(o.refused)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %s | %.0f | %d | %.2f | %s | %.2f %% | %s |\n", o.name, o.before(), o.goodput(p.trigger), o.recoveryText(),
			o.goodput(p.tail()), o.peakLoad(), float64(o.peakLoad())/p.capacity, seconds(o.longestWait()), 100*float64(o.calls.succeeded)/float64(o.calls.calls), refused)
	}
	if len(h.sweep) == 0 {
		return b.String()
	}
	fmt.Fprintf(&b, "\nThe budget alone and the limit alone with one setting changed: how long after the trigger goodput recovered, and the limit's lowest value and its value at the run's end.\n\n| Setting | %s | %s | Limit: lowest, at the end |\n| --- | ---: | ---: | ---: |\n", settingGuards[0].name, settingGuards[1].name)
	row := func(name string, runs ...*metastableRun) {
		low, _ := runs[1].lowestLimit()
		fmt.Fprintf(&b, "| %s | %s | %s | %d, %d |\n", name, runs[0].recoveryText(), runs[1].recoveryText(), low, runs[1].lastLimit())
	}
	row(fmt.Sprintf("as above (load %.0f %%, drop to %.0f %%, timeout %s)", 100*p.rate/p.capacity, 100*p.dropped/p.capacity, span(p.timeout)), budget, limit)
	for i, st := range p.settings {
		row(st.name, h.sweep[i]...)
	}
	for i, st := range p.settings {
		l := h.sweep[i][1]
		if _, ok := l.recovery(); !ok {
			low, at := l.lowestLimit()
			fmt.Fprintf(&b, "\nWith the setting \"%s\", the adaptive limit alone did not recover: it fell to %d at %s and was %d at the end of the run, and goodput in the run's last %s was %.0f calls/s.\n",
				st.name, low, seconds(at), l.lastLimit(), span(p.tail().length()), l.goodput(p.tail()))
		}
	}
	return b.String()
}

func (r *results) markdownI() string {
	var b strings.Builder
	none, paused := limitedByName(r.i, limitedVariants[0]), limitedByName(r.i, limitedVariants[1])
	p := none.params
	fmt.Fprintf(&b, "Without a shared pause %.1f %% of the requests were answered 429 (%d), and the second after a reset saw up to %d requests, %.2fx the limit (retries: up to %d). With the shared pause %.2f %% were (%d), and the second after a reset saw at most %d requests, %.2fx (retries: at most %d); no request went before the time a 429 had named (%d did without it). Goodput was %.1f calls/s without it and %.1f with it.\n\n",
		100*none.tooManyShare(), none.tooMany(), none.spike(), p.times(float64(none.spike())), none.retrySpike(),
		100*paused.tooManyShare(), paused.tooMany(), paused.spike(), p.times(float64(paused.spike())), paused.retrySpike(), none.early, none.goodputRate(), paused.goodputRate())
	fmt.Fprintf(&b, "%d clients for %s, each making a call, then another after 0–%s (uniform); a downstream that admits %d requests in each fixed window of %s (R = %.0f/s) and answers the rest 429 with Retry-After the whole seconds to the window's reset; %d attempts a call, no budget, network latency %s; the pause's Spread %s (the clients over R).\n\n",
		p.clients, span(p.duration), span(2*p.think), p.quota(), span(p.window), p.perSecond, p.attempts, span(p.latency), span(p.spread))
	fmt.Fprintf(&b, "| Variant | Requests | 429s | %% of requests | Most 429s in a second | Second after a reset, most | × R | Retries in it, most | Busiest %s after a reset, per second | × R | Busiest second | Goodput (calls/s) | Calls | Calls failed | Requests before a 429's time |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n", span(limitedBin))
	for _, o := range r.i {
		failed := fmt.Sprint(o.failedCalls())
		if n := o.failed[failedRate]; n > 0 && n == o.failedCalls() {
			failed += " (refused by the rate)"
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f %% | %d | %d | %.2f | %d | %.0f | %.2f | %d | %.1f | %d | %s | %d |\n", o.name, o.requests(), o.tooMany(), 100*o.tooManyShare(), o.tooManyPeak(),
			o.spike(), p.times(float64(o.spike())), o.retrySpike(), o.spikeBin(), p.times(o.spikeBin()), o.busiest(), o.goodputRate(), o.calls, failed, o.early)
	}
	return b.String()
}

// outageChanges lists the hedged outage runs' changes of the load.
func (g *tailResult) outageChanges() string {
	var parts []string
	for i, o := range g.outage[1:] {
		parts = append(parts, fmt.Sprintf("%+.2f %% (%s delay)", 100*g.loadChange(o), []string{"fixed", "adaptive"}[min(i, 1)]))
	}
	return strings.Join(parts, " and ")
}

// latencyText formats a call's latency.
func latencyText(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// span formats a parameter's duration: "5 ms", "2 s", "120 s".
func span(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%g ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%g s", d.Seconds())
}

// millis formats a completion time.
func millis(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

func (r *results) markdownChecks() string {
	var b strings.Builder
	b.WriteString("| Scenario | Bound | Measured | Verdict |\n| --- | --- | --- | --- |\n")
	for _, c := range r.checks() {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", c.scenario, c.bound, c.measured, c.verdict())
	}
	return b.String()
}

// section is one generated block: a scenario's table, or the checks.
type section struct {
	key, title string
	body       func() string
}

// sections are the blocks of the scenarios that ran, in order.
func (r *results) sections() []section {
	var ss []section
	if r.a != nil {
		ss = append(ss, section{"a", "a. Contention: jitter", r.markdownA})
	}
	if r.byName(tokenBucket) != nil {
		ss = append(ss, section{"b", "b. Outage: retry budgets", r.markdownB})
	}
	if r.c != nil {
		ss = append(ss, section{"c", "c. Random failures", r.markdownC})
	}
	if r.d != nil {
		ss = append(ss, section{"d", "d. Nested retries", r.markdownD})
	}
	if r.byName(breaker) != nil {
		ss = append(ss, section{"e", "e. Outage: circuit breaker", r.markdownE})
	}
	if r.f != nil {
		ss = append(ss, section{"f", "f. A blip after steady traffic", r.markdownF})
	}
	if r.g != nil {
		ss = append(ss, section{"g", "g. Tail: hedging", r.markdownG})
	}
	if r.h != nil {
		ss = append(ss, section{"h", "h. Metastable failure: a capacity drop", r.markdownH})
	}
	if r.i != nil {
		ss = append(ss, section{"i", "i. A rate limit with Retry-After: a shared pause", r.markdownI})
	}
	return append(ss, section{"checks", "Bounds", r.markdownChecks})
}

// markdown is results.md.
func (r *results) markdown() string {
	var b strings.Builder
	b.WriteString("# retrysim results\n\n")
	fmt.Fprintf(&b, "Written by `retrysim %s`; do not edit.", r.cfg.commandLine())
	if link := docLink(r.cfg.out, r.cfg.doc); link != "" {
		fmt.Fprintf(&b, " See %s for what the scenarios show.", link)
	}
	b.WriteString("\n")
	for _, s := range r.sections() {
		fmt.Fprintf(&b, "\n## %s\n\n%s", s.title, s.body())
	}
	return b.String()
}
