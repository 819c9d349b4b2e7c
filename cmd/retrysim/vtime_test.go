package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
)

func TestSim_procsRunInVirtualTimeOrder(t *testing.T) {
	s := newSim()
	var got []string
	note := func(name string) { got = append(got, name+"@"+s.Elapsed().String()) }
	s.Go(func(p *proc) {
		note("a")
		p.Sleep(2 * time.Second)
		note("a")
	})
	s.GoAt(time.Second, func(p *proc) {
		note("b")
		p.Sleep(time.Second) // due with a: a was scheduled first
		note("b")
		s.Go(func(*proc) { note("c") })
		p.Sleep(0)
		note("b")
	})
	require.NoError(t, s.run())
	assert.Equal(t, []string{"a@0s", "b@1s", "a@2s", "b@2s", "c@2s", "b@2s"}, got)
	assert.Equal(t, 2*time.Second, s.Elapsed())
}

func TestSim_runWithoutProcsReturns(t *testing.T) {
	require.NoError(t, newSim().run())
}

func TestSim_retrierWaitsInVirtualTime(t *testing.T) {
	s := newSim()
	r, err := retry.New(retry.WithClock(s.Clock()), retry.WithBackoff(retry.Constant(time.Hour)),
		retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
	require.NoError(t, err)
	var at []time.Duration
	var doErr error
	s.Go(func(p *proc) {
		doErr = r.Do(context.Background(), func(context.Context) error {
			at = append(at, s.Elapsed())
			p.Sleep(time.Second)
			return errors.New("down")
		})
	})
	began := time.Now()
	require.NoError(t, s.run())
	var e *retry.Error
	require.ErrorAs(t, doErr, &e)
	assert.Equal(t, retry.OutcomeExhausted, e.Outcome)
	assert.Equal(t, []time.Duration{0, time.Hour + time.Second, 2*time.Hour + 2*time.Second}, at)
	assert.Less(t, time.Since(began), time.Minute, "two hours of waits take no real time")
}

// The Retriers of a stack each wait on a clock of their own, several
// calls on one proc at once.
func TestSim_nestedRetriersWaitOnTheirOwnClocks(t *testing.T) {
	s := newSim()
	build := func(wait time.Duration) *retry.Retrier {
		r, err := retry.New(retry.WithClock(s.Clock()), retry.WithBackoff(retry.Constant(wait)),
			retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithMaxAttempts(2), retry.WithOverload(&retry.OverloadOptions{NestedRetries: true}))
		require.NoError(t, err)
		return r
	}
	outer, inner := build(time.Minute), build(time.Second)
	var at []time.Duration
	s.Go(func(p *proc) {
		_ = outer.Do(context.Background(), func(ctx context.Context) error {
			return inner.Do(ctx, func(context.Context) error {
				at = append(at, s.Elapsed())
				return errors.New("down")
			})
		})
	})
	require.NoError(t, s.run())
	assert.Equal(t, []time.Duration{0, time.Second, time.Minute + time.Second, time.Minute + 2*time.Second}, at)
}

// One Retrier shared by many procs, as in the outage scenarios, with
// jittered waits: each proc's wait ends when its own timer says.
func TestSim_sharedRetrierServesManyProcs(t *testing.T) {
	s := newSim()
	r, err := retry.New(retry.WithClock(s.Clock()), retry.WithRandom(rand.NewPCG(1, 2)), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
	require.NoError(t, err)
	const procs = 200
	done := 0
	for i := range procs {
		s.GoAt(time.Duration(i)*time.Millisecond, func(p *proc) {
			failed := false
			err := r.Do(context.Background(), func(context.Context) error {
				p.Sleep(10 * time.Millisecond)
				if !failed {
					failed = true
					return errors.New("once")
				}
				return nil
			})
			assert.NoError(t, err)
			done++
		})
	}
	require.NoError(t, s.run())
	assert.Equal(t, procs, done)
}

func TestVclock_unmodelledMethodsSaySo(t *testing.T) {
	c := newSim().Clock()
	assert.PanicsWithValue(t, "retrysim: the virtual clock has no After; the simulation must model it first",
		func() { c.After(time.Second) })
}

// hedgedRun makes one hedged call on s with a fixed delay of 10 ms: its
// attempt k sleeps took[k-1] and then returns fail[k-1]. It returns what
// each attempt saw and when the call returned.
type hedgedAttempt struct {
	start, end time.Duration
	cause      error // the context's cause if it ended the attempt
}

func hedgedRun(t *testing.T, took []time.Duration, fail []error) (attempts []hedgedAttempt, returned time.Duration, err error) {
	t.Helper()
	s := newSim()
	r, err := retry.New(retry.WithClock(s.Clock()), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithRandom(rand.NewPCG(1, 2)),
		retry.WithHedge(&retry.HedgeOptions{Delay: 10 * time.Millisecond}))
	require.NoError(t, err)
	s.Go(func(*proc) {
		err = r.Hedge(s.Context(), func(ctx context.Context) error {
			return s.attempt(func(p *proc, rd *round) error {
				k := len(attempts)
				attempts = append(attempts, hedgedAttempt{start: s.Elapsed()})
				ended := p.sleepCtx(rd, ctx, took[k])
				attempts[k].end = s.Elapsed()
				if ended {
					attempts[k].cause = context.Cause(ctx)
					return attempts[k].cause
				}
				return fail[k]
			})
		})
		returned = s.Elapsed()
	})
	require.NoError(t, s.run())
	return attempts, returned, err
}

// A hedge starts beside an attempt that has not answered after the
// delay; the first to succeed wins, and the other ends at once.
func TestSim_hedgeCutsASlowAttemptShort(t *testing.T) {
	ms := time.Millisecond
	attempts, returned, err := hedgedRun(t, []time.Duration{time.Second, 5 * ms}, []error{nil, nil})
	require.NoError(t, err)
	assert.Equal(t, 15*ms, returned)
	require.Len(t, attempts, 2)
	assert.Equal(t, hedgedAttempt{0, 15 * ms, retry.ErrHedgeLost}, attempts[0])
	assert.Equal(t, hedgedAttempt{10 * ms, 15 * ms, nil}, attempts[1])
}

// The caller's attempt fails while two hedges run: the call waits, in
// virtual time, for the one that succeeds, and the third loses.
func TestSim_hedgedCallWaitsForItsHedges(t *testing.T) {
	ms := time.Millisecond
	attempts, returned, err := hedgedRun(t, []time.Duration{20 * ms, 30 * ms, 100 * ms},
		[]error{errors.New("first"), nil, nil})
	require.NoError(t, err)
	assert.Equal(t, 40*ms, returned)
	assert.Equal(t, []hedgedAttempt{{0, 20 * ms, nil}, {10 * ms, 40 * ms, nil}, {20 * ms, 40 * ms, retry.ErrHedgeLost}}, attempts)
}

// Every attempt fails: the round ends with the last, and the call
// waits and retries, unhedged since its attempts are spent.
func TestSim_hedgedRoundThatFailsEndsWithItsLastAttempt(t *testing.T) {
	ms := time.Millisecond
	down := errors.New("down")
	attempts, returned, err := hedgedRun(t, []time.Duration{50 * ms, 15 * ms, 5 * ms}, []error{down, down, down})
	var e *retry.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retry.OutcomeExhausted, e.Outcome)
	assert.Equal(t, 3, e.Attempts)
	assert.Equal(t, 50*ms, returned)
	assert.Equal(t, []hedgedAttempt{{0, 50 * ms, nil}, {10 * ms, 25 * ms, nil}, {20 * ms, 25 * ms, nil}}, attempts)
}

// The caller's attempt fails first: it waits for each hedge in turn.
func TestSim_hedgedCallWaitsForEveryHedgeToFail(t *testing.T) {
	ms := time.Millisecond
	down := errors.New("down")
	attempts, returned, err := hedgedRun(t, []time.Duration{20 * ms, 30 * ms, 100 * ms}, []error{down, down, down})
	var e *retry.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retry.OutcomeExhausted, e.Outcome)
	assert.Equal(t, 120*ms, returned)
	assert.Equal(t, []hedgedAttempt{{0, 20 * ms, nil}, {10 * ms, 40 * ms, nil}, {20 * ms, 120 * ms, nil}}, attempts)
}

// WithAttemptTimeout in virtual time: each attempt's context ends at its
// deadline on the sim's clock, and the Retrier retries the attempt that
// ran out of it.
func TestSim_attemptTimeoutInVirtualTime(t *testing.T) {
	s := newSim()
	r, err := retry.New(retry.WithClock(s.Clock()), retry.WithAttemptTimeout(100*time.Millisecond),
		retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter),
		retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
	require.NoError(t, err)
	var deadlines []time.Duration
	var doErr error
	s.Go(func(p *proc) {
		doErr = r.Do(context.Background(), func(ctx context.Context) error {
			deadline, ok := ctx.Deadline()
			assert.True(t, ok)
			deadlines = append(deadlines, deadline.Sub(epoch))
			assert.NoError(t, ctx.Err())
			p.Sleep(deadline.Sub(s.Now()))
			return ctx.Err()
		})
	})
	require.NoError(t, s.run())
	var e *retry.Error
	require.ErrorAs(t, doErr, &e)
	assert.Equal(t, retry.OutcomeExhausted, e.Outcome, "an attempt's timeout is retried")
	assert.ErrorIs(t, doErr, context.DeadlineExceeded)
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{100 * ms, 1200 * ms, 2300 * ms}, deadlines)
}

func TestVclock_deadlineContext(t *testing.T) {
	s := newSim()
	c := s.Clock()
	ctx, cancel := c.WithTimeout(context.Background(), time.Second)
	s.Go(func(p *proc) {
		assert.NoError(t, ctx.Err())
		p.Sleep(time.Second)
		assert.Equal(t, context.DeadlineExceeded, ctx.Err())
		cancel()
		assert.Equal(t, context.DeadlineExceeded, ctx.Err(), "the first of the deadline and cancel")
		early, cancelEarly := c.WithTimeout(context.Background(), time.Second)
		cancelEarly()
		p.Sleep(time.Second)
		assert.Equal(t, context.Canceled, early.Err())
	})
	require.NoError(t, s.run())
	assert.PanicsWithValue(t, "retrysim: the virtual clock has no Done of an attempt's context; the simulation must model it first",
		func() { ctx.Done() })
	assert.Panics(t, func() { c.WithTimeout(ctx, time.Second) }, "a deadline under one that ends")
}
