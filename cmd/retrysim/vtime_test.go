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
		retry.WithJitter(retry.NoJitter), retry.WithBudget(nil))
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
			retry.WithJitter(retry.NoJitter), retry.WithBudget(nil), retry.WithMaxAttempts(2), retry.WithNestedRetries())
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
	r, err := retry.New(retry.WithClock(s.Clock()), retry.WithRandom(rand.NewPCG(1, 2)), retry.WithBudget(nil))
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
