package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/steadfast-go/retry"
)

// Scenario c: the same open-loop load on a downstream that fails 5 % of
// attempts at random, without an outage or a capacity limit. A budget
// should leave such failures to be retried: the success rate with one
// should be that without one. The same runs at other failure rates show
// where each budget starts to refuse.

// failuresParams configures scenario c.
type failuresParams struct {
	seed     uint64
	rate     float64
	duration time.Duration
	failP    float64   // the rate of the bound
	sweep    []float64 // every failure rate run, failP among them
	latency  time.Duration
}

func defaultFailures(seed uint64) failuresParams {
	return failuresParams{seed: seed, rate: 200, duration: 300 * time.Second, failP: 0.05,
		sweep: []float64{0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3}, latency: 10 * time.Millisecond}
}

// budgets are scenario c's variants.
var budgets = []protection{noBudget, tokenBucket, ratio}

// failuresRun is one variant's run at one failure rate.
type failuresRun struct {
	name     string
	failP    float64
	calls    *loadStats
	attempts int
	refused  int // calls that a budget stopped
}

// runFailures runs variant v of scenario c at failure rate failP. Every
// variant draws the downstream's failures from the same stream.
func runFailures(p failuresParams, v protection, failP float64) (*failuresRun, error) {
	s := newSim()
	d := &downstream{s: s, latency: p.latency, timeout: time.Second, failP: failP,
		rng:      rand.New(rand.NewPCG(p.seed, stream(scenarioC, 0, 1))),
		attempts: newSeries(time.Second, p.duration)}
	r, _, err := v.retrier(s, 0, p.seed, scenarioC)
	if err != nil {
		return nil, err
	}
	st := load{rate: p.rate, duration: p.duration}.drive(s, d, r, time.Second)
	if err := s.run(); err != nil {
		return nil, err
	}
	return &failuresRun{name: v.name, failP: failP, calls: st, attempts: d.attempts.sum(window{0, p.duration}),
		refused: st.outcomes[retry.OutcomeRefused]}, nil
}

// runSweep runs scenario c at every failure rate of p.sweep with every
// budget: [i][j] is budgets[j] at p.sweep[i].
func runSweep(p failuresParams) ([][]*failuresRun, error) {
	runs := make([][]*failuresRun, len(p.sweep))
	for i := range runs {
		runs[i] = make([]*failuresRun, len(budgets))
	}
	err := parallel(len(p.sweep)*len(budgets), 0, func(k int) (err error) {
		i, j := k/len(budgets), k%len(budgets)
		if runs[i][j], err = runFailures(p, budgets[j], p.sweep[i]); err != nil {
			return fmt.Errorf("scenario c, %s at %g %%: %w", budgets[j].name, 100*p.sweep[i], err)
		}
		return nil
	})
	return runs, err
}

func (r *failuresRun) successRate() float64 {
	return float64(r.calls.succeeded) / float64(r.calls.calls)
}

// perCall is the downstream's attempts per call.
func (r *failuresRun) perCall() float64 { return float64(r.attempts) / float64(r.calls.calls) }

// Scenario d: three Retriers nested, each of 3 attempts and no budget
// (so that only the rule is measured), during an outage of the leaf: the
// leaf calls that one user call makes, with the one-layer rule (the
// default) and without it (every layer built with OverloadOptions.NestedRetries).

// nestedParams configures scenario d.
type nestedParams struct {
	seed     uint64
	layers   int
	attempts int
	users    int // user calls, one after another
}

func defaultNested(seed uint64) nestedParams {
	return nestedParams{seed: seed, layers: 3, attempts: 3, users: 100}
}

// nestedRun is one variant's run.
type nestedRun struct {
	name      string
	leafCalls []int          // per user call
	outer     []*retry.Error // what each user call's outermost Do returned
}

var errLeafDown = errors.New("leaf unavailable")

// runNested runs scenario d with the rule, or without it.
func runNested(p nestedParams, nestedRetries bool) (*nestedRun, error) {
	s := newSim()
	layers := make([]*retry.Retrier, p.layers)
	for i := range layers {
		opts := []retry.Option{retry.WithMaxAttempts(p.attempts), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}),
			retry.WithClock(s.Clock()), // a clock per layer: see vclock
			retry.WithRandom(rand.NewPCG(p.seed, stream(scenarioD, 0, i)))}
		if nestedRetries {
			opts = append(opts, retry.WithOverload(&retry.OverloadOptions{NestedRetries: true}))
		}
		r, err := retry.New(opts...)
		if err != nil {
			return nil, err
		}
		layers[i] = r
	}
	name := "one-layer rule (default)"
	if nestedRetries {
		name = "NestedRetries at every layer"
	}
	run := &nestedRun{name: name, leafCalls: make([]int, p.users), outer: make([]*retry.Error, p.users)}
	var callErr error
	s.Go(func(u *proc) {
		for i := range p.users {
			var call func(ctx context.Context, layer int) error
			call = func(ctx context.Context, layer int) error {
				return layers[layer].Do(ctx, func(ctx context.Context) error {
					if layer == len(layers)-1 {
						run.leafCalls[i]++
						u.Sleep(10 * time.Millisecond)
						return errLeafDown
					}
					return call(ctx, layer+1)
				})
			}
			// It fails, as the leaf is down.
			if err := call(context.Background(), 0); !errors.As(err, &run.outer[i]) && callErr == nil {
				callErr = fmt.Errorf("user call %d: %w, not a *retry.Error", i, err)
			}
		}
	})
	if err := s.run(); err != nil {
		return nil, err
	}
	return run, callErr
}

// perUser is the mean of leaf calls per user call.
func (r *nestedRun) perUser() float64 {
	total := 0
	for _, n := range r.leafCalls {
		total += n
	}
	return float64(total) / float64(len(r.leafCalls))
}
