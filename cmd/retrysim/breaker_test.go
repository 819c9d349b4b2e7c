package main

import (
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/sony/gobreaker/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry/overload"
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
				gate func(bool)
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
					failed := time.Since(start) < downFor
					inFlight[0].gate(failed)
					if failed {
						inFlight[0].cb(errDownstream)
					} else {
						inFlight[0].cb(nil)
					}
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
