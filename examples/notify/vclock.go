package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/steadfast-go/retry/retrytest"
)

// Virtual time. Each job runs on its own mock clock (retrytest.Clock),
// set to the real time when the job starts (later, when an earlier run's
// virtual time ran past it: see backends.epoch), that moves only when
//   - the Retrier has armed a wait: the clock moves on by it at once, so
//     backoff and Retry-After waits cost no real time;
//   - an answer comes back: virtualNetwork moves the clock on by the
//     latency the service says the answer took, or, when that is longer
//     than the attempt timeout, by the timeout, which then fires on the
//     mock clock as it would on a real one.
//
// A job's duration is measured on its clock, so it depends only on the
// seed: the same for every run, whatever the machine and the scheduling.
// The waits the library computes, the attempt timeouts it sets and the
// deadlines it checks are real; only the clock they run on is not.

// jobClock is one job's virtual clock and the goroutine that advances it.
// Every advance goes through that one goroutine: clock.Mock's Add sets
// the time it computed when it began only once it has fired the timers,
// so two Adds at once (a wait's, which wakes the Retrier, and the next
// answer's latency) could move the clock back and strand a timer. Stop
// it when the job ends.
type jobClock struct {
	*retrytest.Clock
	spend chan time.Duration // latencies, from virtualNetwork
	spent chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

func newJobClock(now time.Time) *jobClock {
	c := &jobClock{Clock: retrytest.NewClock(), spend: make(chan time.Duration), spent: make(chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
	c.Set(now)
	go func() {
		defer close(c.done)
		for {
			select {
			case d := <-c.Armed(): // the Retrier waits on its timer
				c.Add(d)
			case d := <-c.spend:
				c.Add(d)
				c.spent <- struct{}{}
			case <-c.stop:
				return
			}
		}
	}()
	return c
}

// Spend moves the clock on by d, and returns once it has.
func (c *jobClock) Spend(d time.Duration) {
	c.spend <- d
	<-c.spent
}

// Stop ends the driver; the job must have returned.
func (c *jobClock) Stop() {
	close(c.stop)
	<-c.done
}

// virtualNetwork is the base RoundTripper of a job's retryhttp.Transport:
// it sends the request to the service for real, then spends the answer's
// simulated latency on the job's clock.
type virtualNetwork struct {
	clk     *jobClock
	base    http.RoundTripper
	timeout time.Duration // the Retrier's attempt timeout
}

// errClockStuck reports a bug of the simulation: an attempt the virtual
// clock should have timed out did not end.
var errClockStuck = errors.New("notify: the virtual clock did not end a timed-out attempt")

func (v *virtualNetwork) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := v.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	latency, err := time.ParseDuration(resp.Header.Get(latencyHeader))
	if err != nil {
		latency = 0
	}
	limit := v.timeout
	if dl, ok := req.Context().Deadline(); ok {
		limit = min(limit, dl.Sub(v.clk.Now()))
	}
	if latency < limit {
		v.clk.Spend(latency)
		return resp, nil
	}
	// The answer would come too late: the client gives up first. Moving
	// the clock to the limit fires the attempt's timeout (or the job's
	// deadline), which cancels the request's context.
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	v.clk.Spend(max(limit, 0))
	select {
	case <-req.Context().Done():
		return nil, context.Cause(req.Context())
	case <-time.After(10 * time.Second):
		return nil, errClockStuck
	}
}
