package main

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/steadfast-go/retry"
)

// The errors of the simulated downstream: each is worth retrying.
var (
	errTimeout = errors.New("downstream did not answer within the attempt timeout")
	errFlaky   = errors.New("downstream failed at random")
	errBlip    = errors.New("downstream reset the connection")
)

// downstream is a simulated service. An attempt reaches it after half
// the network's latency; it queues for a server that serves capacity
// attempts per second, one after another, and its answer returns after
// the other half. The client gives up on an attempt after timeout, but a
// request it gave up on still takes its turn in the queue, as a server
// that does not know of the client's deadline does. During the outage
// the downstream answers nothing, so every attempt times out. During the
// blip, each call's first attempt that reaches it fails at once (a reset
// connection), and its later ones are served. During the drop it serves
// dropped attempts per second: an attempt whose turn comes within it
// takes 1/dropped seconds. An attempt served may still fail at random
// with probability failP.
type downstream struct {
	s        *sim
	latency  time.Duration // there and back
	timeout  time.Duration // the client's, per attempt (attemptWithin: its context's deadline)
	outage   window        // no answer within it
	blip     window        // each call's first attempt within it fails
	capacity float64       // attempts per second it serves; 0: no limit
	drop     window        // capacity is dropped within it
	dropped  float64       // attempts per second it serves within drop
	failP    float64       // probability that an attempt fails on its own
	rng      *rand.Rand    // for failP
	busy     time.Duration // when the server has served its queue

	attempts series // attempts sent to it, by when they were sent
}

// window is a span of virtual time, [from, to).
type window struct{ from, to time.Duration }

func (w window) contains(t time.Duration) bool { return t >= w.from && t < w.to }
func (w window) length() time.Duration         { return w.to - w.from }

// attempt is one call of the downstream by p, for a call that has met
// the blip already if *blipped.
func (d *downstream) attempt(p *proc, blipped *bool) error {
	return d.attemptOn(p, nil, nil, blipped)
}

// attemptOn is attempt as an attempt of the hedged round rd on ctx: it
// returns ctx's cause if ctx ends first (see vhedge.go). A request whose
// client cancelled it still takes its turn in the queue, as one that timed
// out does. Without a round it is attempt.
func (d *downstream) attemptOn(p *proc, rd *round, ctx context.Context, blipped *bool) error {
	now := d.s.Elapsed()
	d.attempts.add(now, 1)
	if d.blip.contains(now+d.latency/2) && !*blipped {
		*blipped = true
		if p.sleepCtx(rd, ctx, d.latency) {
			return context.Cause(ctx)
		}
		return errBlip
	}
	answer, err := d.serve(now + d.latency/2)
	if answer > now+d.timeout {
		if p.sleepCtx(rd, ctx, d.timeout) {
			return context.Cause(ctx)
		}
		return errTimeout
	}
	if p.sleepCtx(rd, ctx, answer-now) {
		return context.Cause(ctx)
	}
	return err
}

// serve takes a request that arrives at t and says when its answer is
// back at the client (never, during the outage) and what it is.
func (d *downstream) serve(t time.Duration) (time.Duration, error) {
	const never = time.Duration(math.MaxInt64)
	if d.outage.contains(t) {
		return never, errTimeout
	}
	done := t
	if d.capacity > 0 {
		start, rate := max(t, d.busy), d.capacity
		if d.drop.contains(start) {
			rate = d.dropped
		}
		done = start + time.Duration(float64(time.Second)/rate)
		d.busy = done
	}
	var err error
	if d.failP > 0 && d.rng.Float64() < d.failP {
		err = errFlaky
	}
	return done + d.latency/2, err
}

// attemptWithin is an attempt made with WithAttemptTimeout: the client
// gives up at its context's deadline (on the virtual clock) and returns
// the context's error, while the request keeps its turn in the queue.
func (d *downstream) attemptWithin(p *proc, ctx context.Context) error {
	now := d.s.Elapsed()
	d.attempts.add(now, 1)
	answer, err := d.serve(now + d.latency/2)
	if deadline, ok := ctx.Deadline(); ok && answer > deadline.Sub(epoch) {
		p.Sleep(deadline.Sub(epoch) - now)
		return ctx.Err()
	}
	p.Sleep(answer - now)
	return err
}

// wait is how long a request that arrives now waits for its turn.
func (d *downstream) wait() time.Duration { return max(d.busy-d.s.Elapsed(), 0) }

// series counts events in bins of width step from time zero.
type series struct {
	step time.Duration
	n    []int
}

func newSeries(step, span time.Duration) series {
	return series{step: step, n: make([]int, int((span+step-1)/step))}
}

func (s *series) add(t time.Duration, k int) {
	i := int(t / s.step)
	for i >= len(s.n) {
		s.n = append(s.n, 0)
	}
	s.n[i] += k
}

// sum is the count over w (bins that start within it).
func (s *series) sum(w window) int {
	total := 0
	for i, k := range s.n {
		if w.contains(time.Duration(i) * s.step) {
			total += k
		}
	}
	return total
}

// peak is the largest bin that starts within w.
func (s *series) peak(w window) int {
	m := 0
	for i, k := range s.n {
		if w.contains(time.Duration(i)*s.step) && k > m {
			m = k
		}
	}
	return m
}

// load is an open-loop load on a downstream: calls start at rate per
// second, evenly spaced, for the run's length, whatever became of the
// earlier ones, as requests from many users do. Each call is r.Do of one
// downstream attempt.
type load struct {
	rate     float64
	duration time.Duration
	hedge    bool // calls are r.Hedge on the simulation's context (vhedge.go)
	// within: each attempt ends at its context's deadline, which r's
	// WithAttemptTimeout sets, not at the downstream's timeout.
	within bool
}

// loadStats is what became of a load's calls.
type loadStats struct {
	calls, succeeded int
	started, failed  series // calls by the time they started (failed: did not succeed)
	goodput          series // calls that succeeded, by the time they returned
	outcomes         map[retry.Outcome]int
}

// drive starts the load's calls on s, each on a proc of its own calling
// r.Do with the downstream's attempt; run s afterwards.
func (l load) drive(s *sim, d *downstream, r *retry.Retrier, bin time.Duration) *loadStats {
	st := &loadStats{started: newSeries(bin, l.duration), failed: newSeries(bin, l.duration),
		goodput: newSeries(bin, l.duration), outcomes: map[retry.Outcome]int{}}
	interval := time.Duration(float64(time.Second) / l.rate)
	n := int(l.duration / interval)
	s.Go(func(gen *proc) {
		for i := range n {
			gen.Sleep(time.Duration(i)*interval - s.Elapsed())
			s.Go(func(p *proc) {
				start := s.Elapsed()
				var blipped bool
				var err error
				if l.hedge {
					err = r.Hedge(s.Context(), func(ctx context.Context) error {
						return s.attempt(func(p *proc, rd *round) error { return d.attemptOn(p, rd, ctx, &blipped) })
					})
				} else if l.within {
					err = r.Do(context.Background(), func(ctx context.Context) error { return d.attemptWithin(p, ctx) })
				} else {
					err = r.Do(context.Background(), func(context.Context) error { return d.attempt(p, &blipped) })
				}
				st.calls++
				st.started.add(start, 1)
				if err == nil {
					st.succeeded++
					st.goodput.add(s.Elapsed(), 1)
					return
				}
				st.failed.add(start, 1)
				var e *retry.Error
				if errors.As(err, &e) {
					st.outcomes[e.Outcome]++
				}
			})
		}
	})
	return st
}

// recovery is how long after the outage calls kept failing: from its end
// to the end of the last bin after it in which a call that started then
// failed; 0 if none did.
func (st *loadStats) recovery(outage window) time.Duration {
	last := time.Duration(0)
	for i, k := range st.failed.n {
		start := time.Duration(i) * st.failed.step
		if start >= outage.to && k > 0 {
			last = start + st.failed.step - outage.to
		}
	}
	return last
}
