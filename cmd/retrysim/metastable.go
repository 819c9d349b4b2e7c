package main

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
)

// Scenario h: a metastable failure ("Metastable Failures in Distributed
// Systems", Bronson et al., HotOS 2021; "Metastable Failures in the
// Wild", Huang et al., OSDI 2022). A downstream of fixed capacity serves
// attempts one after another from a queue (see downstream), so an
// attempt's latency is its wait in the queue and its service, and grows
// with the queue. An open-loop load of rate calls per second, below the
// capacity, calls it through one Retrier shared by all calls: New's
// default policy (3 attempts, Exponential(100ms, 2, 10s), full jitter)
// with WithAttemptTimeout, after which the client gives up on the attempt
// and retries, while the downstream still serves the request it gave up
// on. The trigger: for 10 s the downstream serves only dropped attempts
// a second, then its capacity is back. Without protection the queue
// built in the trigger makes every attempt time out, so every call makes
// all its attempts, and three times the load keeps the queue growing
// once the capacity is back: the system stays down after its trigger has
// gone. The variants differ in what the Retrier gets: nothing, New's
// default budget, an adaptive concurrency limit, or both.

// metastableParams configures scenario h.
type metastableParams struct {
	seed     uint64
	rate     float64       // calls per second
	capacity float64       // attempts per second the downstream serves
	dropped  float64       // attempts per second it serves in the trigger
	trigger  window        // the drop
	duration time.Duration // of the run
	latency  time.Duration // the network's, there and back
	timeout  time.Duration // WithAttemptTimeout's
	// settings are the changes of the scenario whose recovery the
	// budget and the limit alone are run at too, charted not.
	settings []setting
}

// setting is a change of scenario h's parameters.
type setting struct {
	name   string
	change func(p *metastableParams)
}

func defaultMetastable(seed uint64) metastableParams {
	return metastableParams{
		seed: seed, rate: 800, capacity: 1000, dropped: 500,
		trigger: window{30 * time.Second, 40 * time.Second}, duration: 120 * time.Second,
		latency: 10 * time.Millisecond, timeout: 2 * time.Second,
		settings: []setting{
			{"load 70 %", func(p *metastableParams) { p.rate = 0.7 * p.capacity }},
			{"load 90 %", func(p *metastableParams) { p.rate = 0.9 * p.capacity }},
			{"attempt timeout 1 s", func(p *metastableParams) { p.timeout = time.Second }},
			{"drop to 1 %", func(p *metastableParams) { p.dropped = 0.01 * p.capacity }},
			{"drop to 1 %, attempt timeout 1 s", func(p *metastableParams) { p.dropped, p.timeout = 0.01*p.capacity, time.Second }},
		},
	}
}

// steady is where the goodput before the trigger is measured: from 5 s
// in, once the first calls are served, to the trigger.
func (p metastableParams) steady() window { return window{5 * time.Second, p.trigger.from} }

// after is the span of the run after the trigger.
func (p metastableParams) after() window { return window{p.trigger.to, p.duration} }

// The recovery: the goodput is back at recoveredShare of the goodput
// before the trigger for recoveredFor consecutive seconds.
const (
	recoveredShare = 0.9
	recoveredFor   = 5
)

// guard is one of scenario h's variants: what the shared Retrier gets
// besides the default policy and the attempt timeout.
type guard struct {
	name   string
	budget bool // New's default budget (the ratio budget); else NoBudget
	limit  bool // an overload.Adaptive with zero options, its defaults
}

// guards are scenario h's variants.
var guards = []guard{
	{name: "no budget, no limit"},
	{name: "ratio budget (default)", budget: true},
	{name: "adaptive limit, no budget", limit: true},
	{name: "ratio budget and adaptive limit", budget: true, limit: true},
}

// metastableRun is one variant's run.
type metastableRun struct {
	name     string
	params   metastableParams
	calls    *loadStats // goodput: successes by the second they returned in
	attempts series     // downstream attempts by second
	// wait is the longest wait in the downstream's queue in each second,
	// sampled every 100 ms.
	wait []time.Duration
	// limits is the adaptive limit's lowest value in each second,
	// sampled with wait; nil without a limit.
	limits  []int
	refused uint64 // attempts the limit refused
}

// runMetastable runs variant g of scenario h.
func runMetastable(p metastableParams, g guard) (*metastableRun, error) {
	s := newSim()
	d := &downstream{s: s, latency: p.latency, capacity: p.capacity, drop: p.trigger, dropped: p.dropped,
		attempts: newSeries(time.Second, p.duration)}
	o := &retry.OverloadOptions{NoBudget: !g.budget}
	var limit *overload.Adaptive
	if g.limit {
		// Its defaults: no queue, so its Clock (which times the queue
		// alone) is never read.
		var err error
		if limit, err = overload.NewAdaptive(overload.AdaptiveOptions{}); err != nil {
			return nil, err
		}
		o.Limit = limit
	}
	r, err := retry.New(retry.WithOverload(o), retry.WithAttemptTimeout(p.timeout), retry.WithClock(s.Clock()),
		retry.WithRandom(rand.NewPCG(p.seed, stream(scenarioH, 0, 0))))
	if err != nil {
		return nil, err
	}
	run := &metastableRun{name: g.name, params: p}
	run.calls = load{rate: p.rate, duration: p.duration, within: true}.drive(s, d, r, time.Second)
	n := int(p.duration / time.Second)
	run.wait = make([]time.Duration, n)
	if limit != nil {
		run.limits = make([]int, n)
	}
	s.Go(func(w *proc) {
		const every = 100 * time.Millisecond
		for t := time.Duration(0); t < p.duration; t += every {
			w.Sleep(t - s.Elapsed())
			i := int(t / time.Second)
			run.wait[i] = max(run.wait[i], d.wait())
			if limit != nil {
				if l := limit.Stats().Limit; run.limits[i] == 0 || l < run.limits[i] {
					run.limits[i] = l
				}
			}
		}
	})
	if err := s.run(); err != nil {
		return nil, err
	}
	run.attempts = d.attempts
	if limit != nil {
		run.refused = limit.Stats().Refused
	}
	return run, nil
}

// settingGuards are the variants run at each setting: the budget alone
// and the limit alone.
var settingGuards = []guard{guards[1], guards[2]}

// metastableResult is scenario h's runs.
type metastableResult struct {
	params metastableParams
	runs   []*metastableRun   // guards'
	sweep  [][]*metastableRun // [i][j]: settingGuards[j] at params.settings[i]
}

// runMetastables runs every variant of scenario h, then the budget and
// the limit at each setting.
func runMetastables(p metastableParams) (*metastableResult, error) {
	res := &metastableResult{params: p, runs: make([]*metastableRun, len(guards)), sweep: make([][]*metastableRun, len(p.settings))}
	for i := range res.sweep {
		res.sweep[i] = make([]*metastableRun, len(settingGuards))
	}
	n := len(guards) + len(p.settings)*len(settingGuards)
	err := parallel(n, 0, func(k int) (err error) {
		if k < len(guards) {
			if res.runs[k], err = runMetastable(p, guards[k]); err != nil {
				return fmt.Errorf("scenario h, %s: %w", guards[k].name, err)
			}
			return nil
		}
		i, j := (k-len(guards))/len(settingGuards), (k-len(guards))%len(settingGuards)
		q := p
		q.settings = nil
		p.settings[i].change(&q)
		if res.sweep[i][j], err = runMetastable(q, settingGuards[j]); err != nil {
			return fmt.Errorf("scenario h, %s, %s: %w", p.settings[i].name, settingGuards[j].name, err)
		}
		return nil
	})
	return res, err
}

// byGuard finds the run of variant g.
func (m *metastableResult) byGuard(g guard) *metastableRun {
	for _, r := range m.runs {
		if r.name == g.name {
			return r
		}
	}
	return nil
}

// goodput is the calls that succeeded per second, on average over the
// seconds that start within w.
func (r *metastableRun) goodput(w window) float64 {
	return float64(r.calls.goodput.sum(w)) / w.length().Seconds()
}

// before is the goodput before the trigger.
func (r *metastableRun) before() float64 { return r.goodput(r.params.steady()) }

// recovery is the time from the trigger's end to the first of
// recoveredFor consecutive seconds of the run whose goodput is at least
// recoveredShare of the goodput before the trigger; false if there are
// none.
func (r *metastableRun) recovery() (time.Duration, bool) {
	p := r.params
	bar := recoveredShare * r.before()
	first, last := int(p.trigger.to/time.Second), int(p.duration/time.Second)
	streak := 0
	for i := first; i < last; i++ {
		if float64(r.calls.goodput.n[i]) < bar {
			streak = 0
			continue
		}
		if streak++; streak == recoveredFor {
			return time.Duration(i+1-recoveredFor)*time.Second - p.trigger.to, true
		}
	}
	return 0, false
}

// tail is the last 20 s of the run, where goodput tells whether the
// system is still down.
func (p metastableParams) tail() window { return window{p.duration - 20*time.Second, p.duration} }

// peakLoad is the most attempts the downstream received in one second.
func (r *metastableRun) peakLoad() int { return r.attempts.peak(window{0, r.params.duration}) }

// longestWait is the longest wait in the downstream's queue sampled.
func (r *metastableRun) longestWait() time.Duration {
	m := time.Duration(0)
	for _, w := range r.wait {
		m = max(m, w)
	}
	return m
}

// lowestLimit is the lowest the adaptive limit went, and when first; -1
// without a limit.
func (r *metastableRun) lowestLimit() (int, time.Duration) {
	low, at := -1, time.Duration(0)
	for i, l := range r.limits {
		if low < 0 || l < low {
			low, at = l, time.Duration(i)*time.Second
		}
	}
	return low, at
}

// recoveryText says how long goodput took to recover after the trigger,
// for a table.
func (r *metastableRun) recoveryText() string {
	if rec, ok := r.recovery(); ok {
		return seconds(rec)
	}
	return fmt.Sprintf("not recovered (%s after it)", seconds(r.params.after().length()))
}

// lastLimit is the adaptive limit in the run's last second; -1 without
// a limit.
func (r *metastableRun) lastLimit() int {
	if len(r.limits) == 0 {
		return -1
	}
	return r.limits[len(r.limits)-1]
}

// recoverySentence says how goodput came back after the trigger, for a
// sentence.
func (r *metastableRun) recoverySentence() string {
	switch rec, ok := r.recovery(); {
	case !ok:
		return fmt.Sprintf("did not recover in the %s after the trigger", seconds(r.params.after().length()))
	case rec == 0:
		return "recovered as soon as the trigger ended"
	default:
		return "recovered " + seconds(rec) + " after the trigger ended"
	}
}
