package main

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/sony/gobreaker/v2"

	"github.com/steadfast-go/retry/overload"
)

// gate is a minimal overload.Breaker on sony/gobreaker's
// TwoStepCircuitBreaker, for scenario e. It can switch to the
// retrygobreaker module once that lands, provided it lets the open period
// be measured on an injected clock (see below).
//
// gobreaker decides when to trip (ReadyToTrip on its counts), how many
// probes to let through while half-open (MaxRequests) and when to close
// again. Only its open period is measured here instead: gobreaker reads
// time.Now, which virtual time does not move, so the gate refuses on its
// own for timeout on clk after gobreaker opened, and gobreaker's own
// Timeout is 1 ns, so that it is half-open by the time the gate lets a
// request reach it.
type gate struct {
	cb      *gobreaker.TwoStepCircuitBreaker[struct{}]
	clk     clock.Clock
	timeout time.Duration
	openAt  atomic.Int64 // clk's UnixNano when gobreaker last opened; 0: closed since
}

var _ overload.Breaker = (*gate)(nil)

// errDownstream is what done reports to gobreaker for a failed attempt:
// gobreaker counts any non-nil error as a failure.
var errDownstream = errors.New("attempt failed")

// newGate returns a gate that opens after more than trip consecutive
// failures (gobreaker's default ReadyToTrip is more than 5) for timeout,
// then lets one probe through.
func newGate(clk clock.Clock, trip uint32, timeout time.Duration) *gate {
	g := &gate{clk: clk, timeout: timeout}
	g.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "downstream",
		MaxRequests: 1,
		Timeout:     time.Nanosecond,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures > trip },
		// gobreaker moves from open to half-open lazily, on whatever call
		// comes first after its expiry, a late attempt's done included:
		// only closing ends the gate's open period early.
		OnStateChange: func(_ string, _, to gobreaker.State) {
			switch to {
			case gobreaker.StateOpen:
				g.openAt.Store(g.clk.Now().UnixNano())
			case gobreaker.StateClosed:
				g.openAt.Store(0)
			}
		},
	})
	return g
}

// errOpen is the gate's refusal within the open period.
var errOpen = fmt.Errorf("%w: %w", overload.ErrCircuitOpen, gobreaker.ErrOpenState)

// Allow asks the breaker for an attempt.
func (g *gate) Allow() (func(error), error) {
	// Open until the period has passed, as gobreaker's expiry.Before(now).
	if at := g.openAt.Load(); at != 0 && g.clk.Now().UnixNano() <= at+int64(g.timeout) {
		return nil, errOpen
	}
	done, err := g.cb.Allow()
	if err != nil { // open, or half-open with its probe under way
		return nil, fmt.Errorf("%w: %w", overload.ErrCircuitOpen, err)
	}
	return func(err error) {
		if err != nil && !errors.Is(err, overload.ErrNotCounted) {
			done(errDownstream)
		} else {
			done(nil)
		}
	}, nil
}
