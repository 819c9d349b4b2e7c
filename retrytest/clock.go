// Package retrytest helps test code that retries: a mock clock that says
// when Do has armed a wait, so a test can advance time exactly then.
package retrytest

import (
	"time"

	"github.com/benbjohnson/clock"
)

// Clock is a *clock.Mock that reports each wait Do arms. Give it to
// retry.WithClock; Do calls WaitArmed once per wait between attempts,
// after arming its timer and before blocking on it (with d = 0 for a zero
// wait), so that a test can advance the mock only once Do is parked:
//
//	clk := retrytest.NewClock()
//	r, _ := retry.New(retry.WithClock(clk))
//	go func() { done <- r.Do(ctx, fn) }()
//	for range 2 {
//		clk.Add(<-clk.Armed()) // Do is parked on the mock's timer now
//	}
//
// Build deadlines with clk.WithTimeout, as Do compares them with clk.Now.
// Armed says nothing of an attempt timeout: advance the clock past it
// yourself once fn has started (see Example_attemptTimeout). A Clock is
// safe for concurrent use; its zero value is not usable.
type Clock struct {
	*clock.Mock
	armed chan time.Duration
}

// NewClock returns a Clock set to the mock's epoch (the Unix epoch).
// Armed waits are delivered unbuffered: each WaitArmed blocks until the
// test receives it from Armed.
func NewClock() *Clock {
	return &Clock{Mock: clock.NewMock(), armed: make(chan time.Duration)}
}

// WaitArmed is called by Do, on its goroutine, when it has armed a wait
// of d; it blocks until the test receives d from Armed.
func (c *Clock) WaitArmed(d time.Duration) { c.armed <- d }

// Armed returns the channel on which each armed wait arrives.
func (c *Clock) Armed() <-chan time.Duration { return c.armed }
