package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
)

// Scenario i: a downstream that enforces a rate limit with Retry-After
// (issue #35). It admits perSecond × window requests in each fixed
// window and answers the rest 429, with Retry-After the whole seconds
// to the window's reset, rounded up, as APIs with per-minute quotas do.
// A fixed window, not a token bucket, because it is what makes the
// problem: every request refused in a window is sent back to its reset,
// so a whole window's refused requests arrive in the second after it.
// The window is 10 s, a per-minute quota scaled down so that a short run
// sees several resets; with a window of 1 s, Retry-After (1 s) would
// send a refused request to the same point of the next window, not to
// its reset.
//
// clients closed-loop clients (the workers of one service) each make a
// call, think for a random time and make the next, offering about twice
// the limit. Every call is Do on one Retrier that all share, with 5
// attempts and no budget: each 429 carries Retry-After, so every wait is
// the server's and the backoff never runs; the default ratio budget
// would refuse most retries after 429s and turn them into failed calls,
// hiding what the pause changes. Calls have no deadline (a virtual
// deadline cannot end a wait; see deadlineCtx).
//
// The variants: each call honours Retry-After for itself alone (the
// library without a pause), an overload.Pause shared by every call, and
// the pause with an overload.Rate at the limit.

// limitedParams configures scenario i.
type limitedParams struct {
	seed      uint64
	clients   int
	perSecond float64       // the downstream's limit, R
	window    time.Duration // its fixed window: it admits perSecond × window in each
	think     time.Duration // a client's mean time from a call's end to its next (uniform in [0, 2 think))
	duration  time.Duration // no client starts a call after it
	latency   time.Duration // there and back
	attempts  int           // per call
	spread    time.Duration // the pause's Spread
}

func defaultLimited(seed uint64) limitedParams {
	p := limitedParams{
		seed: seed, clients: 1000, perSecond: 200, window: 10 * time.Second,
		think: 2500 * time.Millisecond, duration: 120 * time.Second,
		latency: 10 * time.Millisecond, attempts: 5,
	}
	p.spread = p.heldSpread()
	return p
}

// heldSpread is the Spread that lets the calls a pause holds go at the
// limit: the pause holds at most every client's next call, so clients / R.
func (p limitedParams) heldSpread() time.Duration {
	return time.Duration(float64(p.clients) / p.perSecond * float64(time.Second))
}

// quota is what the downstream admits in one window.
func (p limitedParams) quota() int { return int(p.perSecond * p.window.Seconds()) }

// offered is the load the clients would offer if every call succeeded
// at once: a call per think time each.
func (p limitedParams) offered() float64 { return float64(p.clients) / p.think.Seconds() }

// resets are the windows' resets within the run that have a whole
// second of it after them.
func (p limitedParams) resets() []time.Duration {
	var rs []time.Duration
	for t := p.window; t+time.Second <= p.duration; t += p.window {
		rs = append(rs, t)
	}
	return rs
}

// limitedBin is the width of scenario i's series: the spike after a
// reset is over within a second.
const limitedBin = 100 * time.Millisecond

// errTooMany is the downstream's 429.
var errTooMany = errors.New("429 Too Many Requests")

// limited is scenario i's downstream: a fixed-window rate limit, and
// nothing else that fails.
type limited struct {
	s        *sim
	p        limitedParams
	admitted map[int]int // by window
	// reached, refused and retried count requests by when they reached
	// it: all, those answered 429, and those that were retries.
	reached, refused, retried series
	// told is the latest time that a 429 answered so far named; early
	// counts the requests sent before it, which a shared pause must not
	// send.
	told  time.Duration
	early int
}

// attempt is one request by proc c, a retry or a call's first:
// admitted, or a 429 with the whole seconds to its window's reset.
func (d *limited) attempt(c *proc, retried bool) error {
	now := d.s.Elapsed()
	if now < d.told {
		d.early++
	}
	at := now + d.p.latency/2
	d.reached.add(at, 1)
	if retried {
		d.retried.add(at, 1)
	}
	k := int(at / d.p.window)
	if d.admitted[k] < d.p.quota() {
		d.admitted[k]++
		c.Sleep(d.p.latency)
		return nil
	}
	d.refused.add(at, 1)
	reset := time.Duration(k+1) * d.p.window
	after := time.Duration(math.Ceil((reset - at).Seconds())) * time.Second
	c.Sleep(d.p.latency)
	d.told = max(d.told, d.s.Elapsed()+after)
	return retry.After(errTooMany, after)
}

// Scenario i's bounds, chosen from 250 runs of each length, seeds 1 to
// 10 (the pause's draws differ from run to run; see docs/overload.md).
// Without a shared pause a third of the requests are 429s and the
// second after a reset sees 5.5x the limit, 5x in retries. With it a few
// 429s a window and a few retries after a reset; the second after it
// sees 1.1x the limit typically, up to 1.7x: the calls the pause held go
// at the limit, and the clients that were thinking through the pause
// come back on their own.
const (
	limitedNoneTooMany  = 0.2  // share of requests answered 429, at least
	limitedNoneSpike    = 4    // the second after some reset, × R, at least
	limitedPauseTooMany = 0.01 // share of requests answered 429, below
	limitedPauseRetries = 0.1  // retries in the second after every reset, × R, at most
	limitedPauseSpike   = 2    // the second after every reset, × R, at most
)

// limitedVariant is one of scenario i's variants.
type limitedVariant struct {
	name  string
	pause bool // an overload.Pause shared by every call
	rate  bool // an overload.Rate of R per second
	// burst is the rate's Burst, as a share of R: 0 for its default, a
	// second's worth.
	burst float64
}

// limitedVariants are scenario i's variants.
var limitedVariants = []limitedVariant{
	{name: "no shared pause"},
	{name: "shared pause", pause: true},
	{name: "shared pause, rate R (burst 1 s)", pause: true, rate: true},
	{name: "shared pause, rate R (burst 0.1 s)", pause: true, rate: true, burst: 0.1},
}

// limitedRun is one variant's run.
type limitedRun struct {
	name    string
	params  limitedParams
	reached series // requests that reached the downstream
	refused series // of them, answered 429
	retried series // of them, retries
	goodput series // calls that succeeded, by when they returned
	calls   int
	failed  map[string]int // calls that failed, by failedWhy
	early   int            // requests sent before a time a 429 had named
}

// runLimited runs variant v of scenario i.
func runLimited(p limitedParams, v limitedVariant) (*limitedRun, error) {
	s := newSim()
	d := &limited{s: s, p: p, admitted: map[int]int{},
		reached: newSeries(limitedBin, p.duration), refused: newSeries(limitedBin, p.duration), retried: newSeries(limitedBin, p.duration)}
	o := &retry.OverloadOptions{NoBudget: true}
	if v.pause {
		pause, err := overload.NewPause(overload.PauseOptions{Spread: p.spread, Clock: s.Clock()})
		if err != nil {
			return nil, err
		}
		o.Pause = pause
	}
	if v.rate {
		rate, err := overload.NewRate(overload.RateOptions{PerSecond: p.perSecond, Burst: int(math.Ceil(v.burst * p.perSecond)), Clock: s.Clock()})
		if err != nil {
			return nil, err
		}
		o.Rate = rate
	}
	r, err := retry.New(retry.WithOverload(o), retry.WithMaxAttempts(p.attempts), retry.WithClock(s.Clock()),
		retry.WithRandom(rand.NewPCG(p.seed, stream(scenarioI, 0, 0))))
	if err != nil {
		return nil, err
	}
	run := &limitedRun{name: v.name, params: p, goodput: newSeries(limitedBin, p.duration), failed: map[string]int{}}
	for i := range p.clients {
		rng := rand.New(rand.NewPCG(p.seed, stream(scenarioI, 0, i+1)))
		think := func() time.Duration { return time.Duration(rng.Float64() * 2 * float64(p.think)) }
		s.GoAt(think(), func(c *proc) {
			for s.Elapsed() < p.duration {
				n := 0
				err := r.Do(context.Background(), func(context.Context) error { n++; return d.attempt(c, n > 1) })
				run.calls++
				if err == nil {
					run.goodput.add(s.Elapsed(), 1)
				} else {
					run.failed[failedWhy(err)]++
				}
				c.Sleep(think())
			}
		})
	}
	if err := s.run(); err != nil {
		return nil, err
	}
	run.reached, run.refused, run.retried, run.early = d.reached, d.refused, d.retried, d.early
	return run, nil
}

// Why a call of scenario i failed.
const (
	failedRate   = "refused by the rate"
	failedPaused = "refused by the pause"
	failed429    = "429 on every attempt"
)

// failedWhy names why a call failed.
func failedWhy(err error) string {
	switch {
	case errors.Is(err, overload.ErrRateLimited):
		return failedRate
	case errors.Is(err, overload.ErrPaused):
		return failedPaused
	case errors.Is(err, errTooMany):
		return failed429
	}
	return err.Error()
}

// runLimiteds runs every variant of scenario i.
func runLimiteds(p limitedParams) ([]*limitedRun, error) {
	runs := make([]*limitedRun, len(limitedVariants))
	err := parallel(len(limitedVariants), 0, func(k int) (err error) {
		if runs[k], err = runLimited(p, limitedVariants[k]); err != nil {
			return fmt.Errorf("scenario i, %s: %w", limitedVariants[k].name, err)
		}
		return nil
	})
	return runs, err
}

// limitedByName finds variant v's run among runs, or nil.
func limitedByName(runs []*limitedRun, v limitedVariant) *limitedRun {
	for _, r := range runs {
		if r.name == v.name {
			return r
		}
	}
	return nil
}

// ever is the whole run and what came after it: calls under way at its
// end still finish.
var ever = window{0, math.MaxInt64}

// requests is the requests that reached the downstream, tooMany the 429s
// among them.
func (r *limitedRun) requests() int { return r.reached.sum(ever) }
func (r *limitedRun) tooMany() int  { return r.refused.sum(ever) }

// tooManyShare is the share of the requests answered 429.
func (r *limitedRun) tooManyShare() float64 { return float64(r.tooMany()) / float64(r.requests()) }

// failedCalls is the calls that failed, for whatever reason.
func (r *limitedRun) failedCalls() int {
	n := 0
	for _, k := range r.failed {
		n += k
	}
	return n
}

// perSecondIn is the most events of s in one whole second from zero
// within the run, [t, t+1 s) for the t of each.
func (r *limitedRun) perSecondIn(s series, ts []time.Duration) int {
	m := 0
	for _, t := range ts {
		m = max(m, s.sum(window{t, t + time.Second}))
	}
	return m
}

// seconds are the starts of the run's whole seconds.
func (p limitedParams) seconds() []time.Duration {
	var ts []time.Duration
	for t := time.Duration(0); t < p.duration; t += time.Second {
		ts = append(ts, t)
	}
	return ts
}

// spike is the most requests that reached the downstream in the second
// after a reset: the retry spike.
func (r *limitedRun) spike() int { return r.perSecondIn(r.reached, r.params.resets()) }

// quietest is the fewest requests that reached it in the second after a
// reset.
func (r *limitedRun) quietest() int {
	m := math.MaxInt
	for _, t := range r.params.resets() {
		m = min(m, r.reached.sum(window{t, t + time.Second}))
	}
	return m
}

// retrySpike is the most retries that reached it in the second after a
// reset.
func (r *limitedRun) retrySpike() int { return r.perSecondIn(r.retried, r.params.resets()) }

// spikeBin is the most requests that reached it in one bin of the
// second after a reset, as a rate per second.
func (r *limitedRun) spikeBin() float64 {
	m := 0
	for _, t := range r.params.resets() {
		m = max(m, r.reached.peak(window{t, t + time.Second}))
	}
	return float64(m) / limitedBin.Seconds()
}

// busiest is the most requests that reached it in any second of the
// run, and tooManyPeak the most 429s.
func (r *limitedRun) busiest() int     { return r.perSecondIn(r.reached, r.params.seconds()) }
func (r *limitedRun) tooManyPeak() int { return r.perSecondIn(r.refused, r.params.seconds()) }

// goodputRate is the calls that succeeded per second within the run.
func (r *limitedRun) goodputRate() float64 {
	return float64(r.goodput.sum(window{0, r.params.duration})) / r.params.duration.Seconds()
}

// times is a spike's rate as a multiple of the limit.
func (p limitedParams) times(perSecond float64) float64 { return perSecond / p.perSecond }
