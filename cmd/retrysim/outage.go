package main

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
)

// Scenarios b and e: an open-loop load of rate calls per second on a
// downstream (see downstream) that answers nothing for a whole outage and
// then comes back. It serves capacity attempts per second (1.25x the
// offered load) from a queue, and works on attempts that the client has
// already given up on, so that retries left over from the outage can keep
// it overloaded after it is back. Every call is Do of the library's
// default policy (3 attempts, Exponential(100ms, 2, 10s), full jitter) on
// one Retrier shared by all calls, as a service has for one downstream;
// the variants differ in the budget or breaker alone.

// outageParams configures scenarios b and e.
type outageParams struct {
	seed     uint64
	rate     float64       // calls per second
	duration time.Duration // of the run
	outage   window
	capacity float64       // attempts per second the downstream serves
	latency  time.Duration // there and back
	timeout  time.Duration // the client's, per attempt
	// breakerTimeout is how long the breaker of scenario e stays open.
	breakerTimeout time.Duration
	// observer, if not nil, watches the shared Retrier (for the tests).
	observer retry.Observer
	// phase names the shaded window in charts: "outage" when "".
	phase string
}

func defaultOutage(seed uint64) outageParams {
	return outageParams{
		seed: seed, rate: 200, duration: 120 * time.Second,
		outage:   window{20 * time.Second, 80 * time.Second},
		capacity: 250, latency: 10 * time.Millisecond, timeout: time.Second,
		breakerTimeout: 5 * time.Second,
	}
}

// protection is one variant: what the shared Retrier gets besides the
// library's default policy.
type protection struct {
	name string
	// opts builds the variant's options on s; tokens, if not nil, reads the
	// token bucket's level.
	opts func(s *sim, breakerTimeout time.Duration) (opts []retry.Option, tokens func() float64, err error)
	// hedged makes the calls r.Hedge with WithHedge(hedge) (scenario g).
	hedged bool
	hedge  *retry.HedgeOptions
}

var (
	noBudget = protection{name: "no budget", opts: func(*sim, time.Duration) ([]retry.Option, func() float64, error) {
		return []retry.Option{retry.WithOverload(&retry.OverloadOptions{NoBudget: true})}, nil, nil
	}}
	tokenBucket = protection{name: "token bucket (100 tokens)", opts: func(*sim, time.Duration) ([]retry.Option, func() float64, error) {
		b, err := overload.NewTokenBucket(overload.TokenBucketOptions{})
		if err != nil {
			return nil, nil, err
		}
		return []retry.Option{retry.WithOverload(&retry.OverloadOptions{Budget: b})}, b.Tokens, nil
	}}
	// ratio is New's default budget, on the Retrier's (the sim's) clock.
	ratio = protection{name: "ratio budget (default)", opts: func(*sim, time.Duration) ([]retry.Option, func() float64, error) {
		return nil, nil, nil
	}}
	breaker = protection{name: "gobreaker, no budget", opts: func(s *sim, timeout time.Duration) ([]retry.Option, func() float64, error) {
		return []retry.Option{retry.WithOverload(&retry.OverloadOptions{NoBudget: true, Breaker: newGate(s.Clock(), 5, timeout)})}, nil, nil
	}}
)

// retrier builds the Retrier that every call of variant v shares on s,
// its random source seeded for scenario.
func (v protection) retrier(s *sim, breakerTimeout time.Duration, seed uint64, scenario int) (*retry.Retrier, func() float64, error) {
	opts, tokens, err := v.opts(s, breakerTimeout)
	if err != nil {
		return nil, nil, err
	}
	if v.hedged {
		opts = append(opts, retry.WithHedge(v.hedge))
	}
	r, err := retry.New(append(opts, retry.WithClock(s.Clock()),
		retry.WithRandom(rand.NewPCG(seed, stream(scenario, 0, 0))))...)
	return r, tokens, err
}

// outageRun is one variant's run.
type outageRun struct {
	name     string
	params   outageParams
	attempts series // downstream attempts by second
	calls    *loadStats
	// refilled is when the token bucket held more than half its size
	// again after the outage, from the outage's end; -1 without a
	// token bucket, or if it never did within the run.
	refilled time.Duration
}

// runOutage runs variant v of the outage scenario, with the random
// streams of scenario.
func runOutage(p outageParams, v protection, scenario int) (*outageRun, error) {
	s := newSim()
	d := &downstream{s: s, latency: p.latency, timeout: p.timeout, outage: p.outage, capacity: p.capacity,
		attempts: newSeries(time.Second, p.duration)}
	r, tokens, err := v.retrier(s, p.breakerTimeout, p.seed, scenario)
	if err == nil && p.observer != nil {
		r, err = r.With(retry.WithObserver(p.observer))
	}
	if err != nil {
		return nil, err
	}
	run := &outageRun{name: v.name, params: p, refilled: -1}
	run.calls = load{rate: p.rate, duration: p.duration, hedge: v.hedged}.drive(s, d, r, 100*time.Millisecond)
	if tokens != nil {
		// Look at the bucket every 100 ms after the outage, until it
		// holds more than half its default 100 tokens and so allows
		// retries again.
		s.GoAt(p.outage.to, func(w *proc) {
			for t := p.outage.to; t < p.duration; t += 100 * time.Millisecond {
				w.Sleep(t - s.Elapsed())
				if tokens() > 50 {
					run.refilled = t - p.outage.to
					return
				}
			}
		})
	}
	if err := s.run(); err != nil {
		return nil, err
	}
	run.attempts = d.attempts
	return run, nil
}

// offered is the calls offered during the outage.
func (r *outageRun) offered() int { return r.calls.started.sum(r.params.outage) }

// amplification is the downstream's attempts during the outage per call
// offered then.
func (r *outageRun) amplification() float64 {
	return float64(r.attempts.sum(r.params.outage)) / float64(r.offered())
}

// meanRate is the downstream's attempts per second during the outage.
func (r *outageRun) meanRate() float64 {
	return float64(r.attempts.sum(r.params.outage)) / r.params.outage.length().Seconds()
}

// peakRate is the most attempts in one second of the outage.
func (r *outageRun) peakRate() int { return r.attempts.peak(r.params.outage) }

// successRate is the share of all the run's calls that succeeded.
func (r *outageRun) successRate() float64 {
	return float64(r.calls.succeeded) / float64(r.calls.calls)
}

// runOutages runs the outage with the variants of the scenarios of cfg,
// b's, then e's gate; the no-budget run serves both.
func runOutages(cfg config) ([]*outageRun, error) {
	var variants []protection
	if cfg.has('b') {
		variants = append(variants, noBudget, tokenBucket, ratio)
	}
	if cfg.has('e') {
		if !cfg.has('b') {
			variants = append(variants, noBudget)
		}
		variants = append(variants, breaker)
	}
	runs := make([]*outageRun, len(variants))
	err := parallel(len(variants), 0, func(k int) (err error) {
		if runs[k], err = runOutage(cfg.outage, variants[k], scenarioB); err != nil {
			return fmt.Errorf("outage, %s: %w", variants[k].name, err)
		}
		return nil
	})
	return runs, err
}

// runBreakerPhases returns how long calls kept failing after outages
// longer than o's by k/breakerPhases of the gate's cycle, for k from 0.
// It depends on where the outage's end falls in the cycle of open periods
// and probes, which starts with the outage.
func runBreakerPhases(o outageParams) ([]time.Duration, error) {
	cycle := o.breakerTimeout + o.timeout
	phases := make([]time.Duration, breakerPhases)
	err := parallel(breakerPhases, 0, func(k int) error {
		p := o
		p.outage.to += cycle * time.Duration(k) / breakerPhases
		run, err := runOutage(p, breaker, scenarioB)
		if err != nil {
			return fmt.Errorf("scenario e, outage %d: %w", k, err)
		}
		phases[k] = run.calls.recovery(p.outage)
		return nil
	})
	return phases, err
}
