package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/steadfast-go/retry"
)

// Scenario g: hedged attempts against a heavy tail. An open-loop load of
// rate calls per second on a downstream without a queue whose every
// attempt takes, independently, between fastMin and fastMax (uniform)
// with probability 1-slowP and slow otherwise: the latency of "The Tail
// at Scale", where one attempt in a hundred meets a pause. Each attempt's
// latency is drawn from a source of its own, seeded by the call's index
// and the attempt's number, so every variant meets the same latencies
// whatever the order in which the attempts run. Every call is one
// Retrier's, New's defaults (3 attempts, the ratio budget) on the sim's
// clock; the variants: Do, which never hedges; Hedge with a fixed delay;
// Hedge with the adaptive delay, WithHedge(nil).
//
// The same scenario checks what hedging costs in an outage: scenario b's
// outage with New's default budget, with Do, and with Hedge and each
// delay. A hedge asks the budget as a retry does, so once the outage has
// drained it hedging adds nothing.

// tailParams configures scenario g.
type tailParams struct {
	seed             uint64
	rate             float64 // calls per second
	calls            int
	fastMin, fastMax time.Duration
	slow             time.Duration
	slowP            float64
	delay            time.Duration // the fixed delay's
}

func defaultTail(seed uint64) tailParams {
	return tailParams{seed: seed, rate: 200, calls: 20000, fastMin: time.Millisecond, fastMax: 10 * time.Millisecond,
		slow: time.Second, slowP: 0.01, delay: 10 * time.Millisecond}
}

func (p tailParams) duration() time.Duration {
	return time.Duration(float64(p.calls) / p.rate * float64(time.Second))
}

// hedging is one of scenario g's variants.
type hedging struct {
	name   string
	hedged bool
	opts   *retry.HedgeOptions // WithHedge's, when hedged
}

// tailVariants are scenario g's variants: none, fixed, adaptive.
func (p tailParams) variants() []hedging {
	return []hedging{
		{name: "no hedging (Do)"},
		{name: fmt.Sprintf("fixed delay (%s)", span(p.delay)), hedged: true, opts: &retry.HedgeOptions{Delay: p.delay}},
		{name: "adaptive delay (p97, WithHedge(nil))", hedged: true},
	}
}

// outageVariants are scenario g's variants of scenario b's outage, with
// the ratio budget's unhedged run first.
func (p tailParams) outageVariants() []protection {
	vs := []protection{ratio}
	for _, h := range p.variants()[1:] {
		v := ratio
		v.name, v.hedged, v.hedge = ratio.name+", hedged: "+h.name, true, h.opts
		vs = append(vs, v)
	}
	return vs
}

// tailRun is one variant's run.
type tailRun struct {
	name      string
	latencies []time.Duration // of each call, sorted
	attempts  int             // the downstream received
	failed    int             // calls that did not succeed
}

// latency draws the latency of attempt k (from 1) of call i.
func (p tailParams) latency(i, k int) time.Duration {
	rng := rand.New(rand.NewPCG(p.seed, stream(scenarioG, i, k)))
	if rng.Float64() < p.slowP {
		return p.slow
	}
	return p.fastMin + time.Duration(rng.Float64()*float64(p.fastMax-p.fastMin))
}

// runTail runs variant h of scenario g.
func runTail(p tailParams, h hedging) (*tailRun, error) {
	s := newSim()
	opts := []retry.Option{retry.WithClock(s.Clock()), retry.WithRandom(rand.NewPCG(p.seed, stream(scenarioG, 0, 0)))}
	if h.hedged {
		opts = append(opts, retry.WithHedge(h.opts))
	}
	r, err := retry.New(opts...)
	if err != nil {
		return nil, err
	}
	run := &tailRun{name: h.name, latencies: make([]time.Duration, p.calls)}
	interval := time.Duration(float64(time.Second) / p.rate)
	s.Go(func(gen *proc) {
		for i := range p.calls {
			gen.Sleep(time.Duration(i)*interval - s.Elapsed())
			s.Go(func(*proc) {
				start, k := s.Elapsed(), 0
				fn := func(ctx context.Context) error {
					return s.attempt(func(q *proc, rd *round) error {
						k++
						run.attempts++
						if q.sleepCtx(rd, ctx, p.latency(i, k)) {
							return context.Cause(ctx)
						}
						return nil
					})
				}
				var err error
				if h.hedged {
					err = r.Hedge(s.Context(), fn)
				} else {
					err = r.Do(s.Context(), fn)
				}
				if err != nil {
					run.failed++
				}
				run.latencies[i] = s.Elapsed() - start
			})
		}
	})
	if err := s.run(); err != nil {
		return nil, err
	}
	slices.Sort(run.latencies)
	return run, nil
}

// percentile is the q-th quantile of the calls' latencies, by nearest
// rank.
func (r *tailRun) percentile(q float64) time.Duration {
	n := len(r.latencies)
	return r.latencies[min(max(int(math.Ceil(q*float64(n)))-1, 0), n-1)]
}

// extraLoad is the downstream's attempts per call, less the call's one.
func (r *tailRun) extraLoad() float64 {
	return float64(r.attempts)/float64(len(r.latencies)) - 1
}

// tailResult is scenario g's runs.
type tailResult struct {
	params tailParams
	runs   []*tailRun   // p.variants()'s
	outage []*outageRun // p.outageVariants()'s, on scenario b's outage
}

// runTails runs scenario g: the tail's variants and the outage's.
func runTails(p tailParams, o outageParams) (*tailResult, error) {
	vs, ovs := p.variants(), p.outageVariants()
	res := &tailResult{params: p, runs: make([]*tailRun, len(vs)), outage: make([]*outageRun, len(ovs))}
	err := parallel(len(vs)+len(ovs), 0, func(k int) (err error) {
		if k < len(vs) {
			if res.runs[k], err = runTail(p, vs[k]); err != nil {
				return fmt.Errorf("scenario g, %s: %w", vs[k].name, err)
			}
			return nil
		}
		v := ovs[k-len(vs)]
		if res.outage[k-len(vs)], err = runOutage(o, v, scenarioB); err != nil {
			return fmt.Errorf("scenario g, outage, %s: %w", v.name, err)
		}
		return nil
	})
	return res, err
}

// loadChange is how much the outage's hedged run o changed the
// downstream's load during the outage against the unhedged one.
func (t *tailResult) loadChange(o *outageRun) float64 {
	return o.amplification()/t.outage[0].amplification() - 1
}
