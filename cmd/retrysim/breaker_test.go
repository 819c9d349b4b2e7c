package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrystats"
)

// The gate measures gobreaker's open period on its own clock; on the real
// clock (fake under synctest) it must decide as gobreaker does with that
// Timeout, attempt by attempt, whatever the timing of the attempts and of
// their ends.
func TestGate_decidesAsGobreakerDoes(t *testing.T) {
	for seed := range uint64(20) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			const timeout = 5 * time.Second
			g := newGate(clock.New(), 5, timeout)
			cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{MaxRequests: 1, Timeout: timeout,
				ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures > 5 }})
			start := time.Now()
			downFor := time.Duration(10+rng.IntN(30)) * time.Second
			type pending struct {
				gate func(error)
				cb   func(error)
			}
			var inFlight []pending // attempts under way, ended first in first out
			allowed, open, probing := 0, 0, 0
			for i := range 1000 {
				gDone, gErr := g.Allow()
				cbDone, cbErr := cb.Allow()
				require.Equal(t, cbErr == nil, gErr == nil, "seed %d, attempt %d at %v", seed, i, time.Since(start))
				switch {
				case gErr == nil:
					allowed++
					inFlight = append(inFlight, pending{gDone, cbDone})
				case errors.Is(gErr, gobreaker.ErrTooManyRequests):
					probing++
					assert.ErrorIs(t, gErr, overload.ErrCircuitOpen)
				default:
					open++
					assert.ErrorIs(t, gErr, overload.ErrCircuitOpen)
					assert.ErrorIs(t, gErr, gobreaker.ErrOpenState)
				}
				// Up to three attempts stay under way at once.
				for len(inFlight) > rng.IntN(4) {
					var err error // what Do passes a breaker: the failure's error, or nil
					if time.Since(start) < downFor {
						err = errDownstream
					}
					inFlight[0].gate(err)
					inFlight[0].cb(err)
					inFlight = inFlight[1:]
				}
				time.Sleep(time.Duration(1+rng.IntN(400)) * time.Millisecond)
			}
			assert.Positive(t, open)
			assert.Positive(t, allowed)
			if seed == 0 {
				assert.Positive(t, probing, "refused while half-open with a probe under way")
			}
		})
	}
}

// refuseAfter allows n attempts, then refuses every one.
type refuseAfter struct{ n int }

func (b *refuseAfter) Allow() (func(error), error) {
	if b.n == 0 {
		return nil, errOpen
	}
	b.n--
	return func(error) {}, nil
}

// A call that a breaker stops after a wait ends right after that wait,
// before any next attempt started: the wait's end must be told all the
// same (OnWaitEnd), or every gauge of waits in progress (retrystats,
// retryprom, retryotel) keeps it waiting for ever. Found by
// TestOutage_countsWhatTheLibraryDid; the defect was in the root module,
// which this module does not change.
func TestBreaker_refusalAfterAWaitEndsTheWait(t *testing.T) {
	s := newSim()
	stats := new(retrystats.Stats)
	done := new(doneLog)
	r, err := retry.New(retry.WithClock(s.Clock()), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithOverload(&retry.OverloadOptions{Breaker: &refuseAfter{n: 1}}),
		retry.WithBackoff(retry.Constant(time.Second)), retry.WithObserver(stats), retry.WithObserver(done))
	require.NoError(t, err)
	var doErr error
	s.Go(func(*proc) {
		doErr = r.Do(context.Background(), func(context.Context) error { return errDownstream })
	})
	require.NoError(t, s.run())
	var e *retry.Error
	require.ErrorAs(t, doErr, &e)
	assert.Equal(t, retry.OutcomeRefused, e.Outcome)
	assert.Equal(t, 1, e.Attempts)
	require.Len(t, done.calls, 1)
	require.Len(t, done.waits, 1, "one WaitEnd, for the wait before the breaker's refusal")
	assert.Equal(t, 1, done.waits[0].Attempt)
	assert.Positive(t, done.waits[0].Delay, "the wait's jittered delay")
	assert.False(t, done.waits[0].Cut, "the timer ended the wait")
	assert.Zero(t, stats.Snapshot().Waiting, "retrystats: calls waiting after the call returned")
}

// doneLog keeps the WaitEnd and Done events, for a simulation's one
// goroutine at a time.
type doneLog struct {
	waits []retry.WaitEnd
	calls []retry.Done
}

func (*doneLog) OnAttemptStart(context.Context, retry.AttemptStart) {}
func (*doneLog) OnAttemptEnd(context.Context, retry.AttemptEnd)     {}
func (*doneLog) OnRetry(context.Context, retry.Scheduled)           {}
func (l *doneLog) OnWaitEnd(_ context.Context, e retry.WaitEnd)     { l.waits = append(l.waits, e) }
func (l *doneLog) OnDone(_ context.Context, d retry.Done)           { l.calls = append(l.calls, d) }
