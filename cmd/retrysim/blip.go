package main

import (
	"fmt"
	"time"
)

// Scenario f: a blip after steady traffic. An open-loop load of rate
// calls per second on a healthy downstream for steady; then, for one
// second, each call's first attempt that reaches the downstream fails at
// once (a connection reset across a pool, one failed deploy step), and
// its retry is served; then healthy again. A budget should let every such
// call retry: the blip costs each call one retry, where the outage of b
// costs two. Every call is Do of the library's default policy on one
// Retrier, as in b; the variants differ in the budget alone.

// blipParams configures scenario f.
type blipParams struct {
	seed    uint64
	rate    float64       // calls per second
	steady  time.Duration // healthy traffic before the blip
	after   time.Duration // healthy traffic after it
	latency time.Duration // there and back
}

func defaultBlip(seed uint64) blipParams {
	return blipParams{seed: seed, rate: 1000, steady: 60 * time.Second, after: 10 * time.Second, latency: 10 * time.Millisecond}
}

// blip is the second in which first attempts fail.
func (p blipParams) blip() window { return window{p.steady, p.steady + time.Second} }

func (p blipParams) duration() time.Duration { return p.steady + time.Second + p.after }

// met is when the calls that meet the blip start: an attempt sent up to
// half a latency before it reaches the downstream within it.
func (p blipParams) met() window { return window{p.blip().from - p.latency/2, p.blip().to} }

// blipVariants are scenario f's variants.
var blipVariants = []protection{noBudget, tokenBucket, ratio}

// runBlip runs variant v of scenario f. Its run is an outageRun whose
// outage is the blip, so that b's chart and measures serve it too.
func runBlip(p blipParams, v protection) (*outageRun, error) {
	s := newSim()
	o := outageParams{seed: p.seed, rate: p.rate, duration: p.duration(), outage: p.blip(), latency: p.latency,
		timeout: time.Second, phase: "blip"}
	d := &downstream{s: s, latency: p.latency, timeout: o.timeout, blip: p.blip(), attempts: newSeries(time.Second, o.duration)}
	r, _, err := v.retrier(s, 0, p.seed, scenarioF)
	if err != nil {
		return nil, err
	}
	run := &outageRun{name: v.name, params: o, refilled: -1}
	run.calls = load{rate: p.rate, duration: o.duration}.drive(s, d, r, p.latency/2)
	if err := s.run(); err != nil {
		return nil, err
	}
	run.attempts = d.attempts
	return run, nil
}

// runBlips runs every variant of scenario f.
func runBlips(p blipParams) ([]*outageRun, error) {
	runs := make([]*outageRun, len(blipVariants))
	err := parallel(len(blipVariants), 0, func(k int) (err error) {
		if runs[k], err = runBlip(p, blipVariants[k]); err != nil {
			return fmt.Errorf("scenario f, %s: %w", blipVariants[k].name, err)
		}
		return nil
	})
	return runs, err
}

// blipSuccess is the share of the calls that met the blip that succeeded.
func blipSuccess(r *outageRun, p blipParams) float64 {
	started := r.calls.started.sum(p.met())
	return 1 - float64(r.calls.failed.sum(p.met()))/float64(started)
}

// blipLoad is the downstream's attempts in the blip and the second after
// it, per call offered then: 1 without retries.
func blipLoad(r *outageRun, p blipParams) float64 {
	w := window{p.blip().from, p.blip().to + time.Second}
	return float64(r.attempts.sum(w)) / float64(r.calls.started.sum(w))
}
