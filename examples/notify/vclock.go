package main

import (
	"container/heap"
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrytest"
)

// Virtual time. Every job runs on one virtual timeline, the run's, that
// starts at its epoch (see backends.epoch) and moves only when
//   - the Retrier has armed a wait: the job sleeps until the wait's end;
//   - an answer comes back: virtualNetwork makes the job sleep for the
//     latency the service says the answer took, or, when that is longer
//     than the attempt timeout, for the timeout, which then fires on the
//     mock clock as it would on a real one;
//   - a worker waits for a redelivery (see runner.take).
//
//
// A pause (overload.Pause, -pause) lets the jobs it held go at its end
// plus a random share of its Spread, drawn from a source no seed sets. So
// that the order stays the flags', a wait that ends within the Spread
// after the pause's end ends at the Spread's end (jobClock.sleep): the
// held jobs go together then, in the order they were held.
//
// One goroutine runs at a time (see timeline): the one whose wake-up is
// earliest, ties going to the one that went to sleep first. So the jobs
// reach the shared retry budget, the idempotency store and the service in
// an order that depends only on the flags, never on the scheduling, and
// the same seed gives the same summary whatever the machine. The waits
// the library computes, the attempt timeouts it sets and the deadlines it
// checks are real; only the clock they run on is not. Sleeping takes no
// real time.

// timeline is the run's virtual time, and the baton that lets one
// goroutine run at a time. A goroutine on the timeline runs until it
// sleeps (sleepUntil) or leaves it (leave); then the sleeper with the
// earliest wake-up, in the order (time, order of going to sleep), runs.
type timeline struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	asleep sleepers
}

// timelineClock is the clock of the memory idempotency store, which
// measures its leases and retention on it: the timeline's time. The store
// only reads Now; the embedded clock, never moved, answers the rest.
type timelineClock struct {
	*retrytest.Clock
	tl *timeline
}

// Now returns the timeline's time, or the embedded clock's before the
// run has set the timeline.
func (c *timelineClock) Now() time.Time {
	if tl := c.tl; tl != nil {
		return tl.Now()
	}
	return c.Clock.Now()
}

type sleeper struct {
	at   time.Time
	seq  uint64
	wake chan struct{}
}

type sleepers []sleeper

func (h sleepers) Len() int { return len(h) }
func (h sleepers) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h sleepers) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *sleepers) Push(x any)   { *h = append(*h, x.(sleeper)) }
func (h *sleepers) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// newTimeline starts a timeline at epoch; clock, if not nil, reads it
// from then on.
func newTimeline(epoch time.Time, clock *timelineClock) *timeline {
	t := &timeline{now: epoch}
	if clock != nil {
		clock.tl = t
	}
	return t
}

// Now returns the timeline's time.
func (t *timeline) Now() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.now
}

// join puts a goroutine that is not yet on the timeline to sleep until
// now; it runs once it has received from the returned channel. Join
// every goroutine before start.
func (t *timeline) join() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.push(t.now)
}

// start wakes the first sleeper; call it once, after the joins.
func (t *timeline) start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next()
}

// sleepUntil lets the others run until the timeline reaches at (now, if
// at is past).
func (t *timeline) sleepUntil(at time.Time) {
	t.mu.Lock()
	wake := t.push(at)
	t.next()
	t.mu.Unlock()
	<-wake
}

// leave takes the calling goroutine off the timeline.
func (t *timeline) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next()
}

// push adds a sleeper; t.mu must be held.
func (t *timeline) push(at time.Time) chan struct{} {
	if at.Before(t.now) {
		at = t.now
	}
	s := sleeper{at: at, seq: t.seq, wake: make(chan struct{})}
	t.seq++
	heap.Push(&t.asleep, s)
	return s.wake
}

// next wakes the earliest sleeper, if any; t.mu must be held.
func (t *timeline) next() {
	if len(t.asleep) == 0 {
		return
	}
	s := heap.Pop(&t.asleep).(sleeper)
	if s.at.After(t.now) {
		t.now = s.at
	}
	close(s.wake)
}

// jobClock is one job's mock clock (retrytest.Clock), kept at the
// timeline's time while the job runs, and the goroutine that advances it.
// Every advance goes through that one goroutine: clock.Mock's Add sets
// the time it computed when it began only once it has fired the timers,
// so two Adds at once (a wait's, which wakes the Retrier, and the next
// answer's latency) could move the clock back and strand a timer. Stop
// it when the job ends.
type jobClock struct {
	*retrytest.Clock
	tl    *timeline
	pause *overload.Pause    // nil: none
	spend chan time.Duration // latencies, from virtualNetwork
	spent chan struct{}
	stop  chan struct{}
	done  chan struct{}
	set   chan struct{} // closed when the last move's Set has returned
	// target is the time of the last move (Unix nanoseconds): see settled.
	target atomic.Int64
}

// newJobClock starts a job's clock at the timeline's time, under pause
// (nil: none); call it on the timeline.
func newJobClock(tl *timeline, pause *overload.Pause) *jobClock {
	c := &jobClock{Clock: retrytest.NewClock(), tl: tl, pause: pause, spend: make(chan time.Duration), spent: make(chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
	c.move(tl.Now())
	go func() {
		defer close(c.done)
		for {
			select {
			case d := <-c.Armed(): // the Retrier waits on its timer
				c.sleep(d)
			case d := <-c.spend:
				c.sleep(d)
				c.spent <- struct{}{}
			case <-c.stop:
				return
			}
		}
	}()
	return c
}

// sleep lets the other jobs run for d of virtual time, then moves the
// clock on by d, which fires the timers due; a wait that ends within the
// pause's Spread after its end lasts to the Spread's end (see the top of
// the file), later than the timer, which still fires.
func (c *jobClock) sleep(d time.Duration) {
	at := c.Now().Add(d)
	if end := c.pause.Until(context.Background()); !end.IsZero() && !at.Before(end) && at.Before(end.Add(pauseSpread)) {
		at = end.Add(pauseSpread)
	}
	c.tl.sleepUntil(at)
	c.move(at)
}

// move sets the clock to t, firing the timers due, and returns once the
// clock reads t. clock.Mock's Set sleeps a millisecond of real time after
// it has set the time, to let the goroutines it woke run; the jobs run one
// at a time, so waiting for that on every move would add seconds to a
// run. So the Set runs on its own goroutine, and the next move waits for
// it to return (the other jobs have run meanwhile): two Sets at once could
// move the clock back.
func (c *jobClock) move(t time.Time) {
	if c.set != nil {
		<-c.set
	}
	set := make(chan struct{})
	c.set = set
	c.target.Store(t.UnixNano())
	go func() {
		defer close(set)
		c.Set(t)
	}()
	for c.Clock.Now().Before(t) {
		runtime.Gosched()
	}
}

// settled returns once the clock reads the last move's time. clock.Mock's
// Set fires each timer due with the clock at the timer's time, and sets
// the time it was given only after: a job woken by a timer due before
// that time (a wait sleep lengthened for the pause) would read the
// timer's, drawn at random, were its reads not held until then. The job
// reads the clock through the methods below.
func (c *jobClock) settled() {
	for c.Clock.Now().UnixNano() < c.target.Load() {
		runtime.Gosched()
	}
}

func (c *jobClock) Now() time.Time                  { c.settled(); return c.Clock.Now() }
func (c *jobClock) Since(t time.Time) time.Duration { c.settled(); return c.Clock.Since(t) }
func (c *jobClock) Until(t time.Time) time.Duration { c.settled(); return c.Clock.Until(t) }
func (c *jobClock) Sleep(d time.Duration)           { c.settled(); c.Clock.Sleep(d) }
func (c *jobClock) After(d time.Duration) <-chan time.Time {
	c.settled()
	return c.Clock.After(d)
}
func (c *jobClock) Tick(d time.Duration) <-chan time.Time { c.settled(); return c.Clock.Tick(d) }
func (c *jobClock) Ticker(d time.Duration) *clock.Ticker  { c.settled(); return c.Clock.Ticker(d) }
func (c *jobClock) Timer(d time.Duration) *clock.Timer    { c.settled(); return c.Clock.Timer(d) }
func (c *jobClock) AfterFunc(d time.Duration, f func()) *clock.Timer {
	c.settled()
	return c.Clock.AfterFunc(d, f)
}
func (c *jobClock) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	c.settled()
	return c.Clock.WithTimeout(parent, d)
}
func (c *jobClock) WithDeadline(parent context.Context, t time.Time) (context.Context, context.CancelFunc) {
	c.settled()
	return c.Clock.WithDeadline(parent, t)
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
	limited *limited      // 429s received
}

// limited counts the 429s the jobs received.
type limited struct {
	all, overRate atomic.Int64 // overRate: the service's rate's, apart from those at random
}

// errClockStuck reports a bug of the simulation: an attempt the virtual
// clock should have timed out did not end.
var errClockStuck = errors.New("notify: the virtual clock did not end a timed-out attempt")

func (v *virtualNetwork) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // a RoundTripper leaves its request as it is
	req.Header.Set(timeHeader, strconv.FormatInt(v.clk.Now().UnixNano(), 10))
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
		if resp.StatusCode == http.StatusTooManyRequests {
			v.limited.all.Add(1)
			if resp.Header.Get(overRateHeader) != "" {
				v.limited.overRate.Add(1)
			}
		}
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
