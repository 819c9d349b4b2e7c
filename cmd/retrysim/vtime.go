package main

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"
)

// sim runs simulated goroutines (procs) in virtual time, one at a time: a
// discrete-event scheduler whose events are procs waking up. A proc runs
// until it sleeps or returns (or, in a hedged call, waits for its hedges:
// see vhedge.go); then the earliest wake-up runs next, ties in the order
// they were scheduled. Only the proc that runs touches the
// simulation, so a run is a function of its inputs alone, whatever the
// Go scheduler does, and virtual time costs nothing to pass.
//
// The procs call the library's real code: each is a goroutine, handed
// the run in turn over a channel, and a Retrier waits on the clock that
// Clock returns.
type sim struct {
	now     time.Duration // since epoch
	seq     uint64
	queue   wakeups
	current *proc // the proc that runs; nil while none does
	live    int   // procs started and not returned
	idle    chan struct{}
	touched []*round // hedged rounds the running proc changed (see vhedge.go)
}

// epoch is virtual time zero: a whole second, as overload.Ratio counts
// whole seconds.
var epoch = time.Unix(0, 0).UTC()

// proc is a simulated goroutine.
type proc struct {
	s      *sim
	wake   chan struct{}
	gen    uint64       // bumped when an early wake-up makes the scheduled one stale
	timers []ownedTimer // the timer of each clock's call under way on this proc

	// Hedging (see vhedge.go): the round whose attempt this proc runs
	// next (its caller's proc) or runs (a timer's proc), the timer a
	// timer's proc fired, and the round whose settling the caller's proc
	// is in.
	round    *round
	hedge    bool // a timer's proc: its attempt is a hedge
	firing   *vtimer
	settling *round
}

type ownedTimer struct {
	owner *vclock
	t     *clock.Timer
}

type wakeup struct {
	at  time.Duration
	seq uint64
	gen uint64 // p.gen when scheduled; stale once it differs
	p   *proc
}

// wakeups is a min-heap of wake-ups by time, then by scheduling order.
type wakeups []wakeup

func (w wakeups) Len() int { return len(w) }
func (w wakeups) Less(i, j int) bool {
	return w[i].at < w[j].at || (w[i].at == w[j].at && w[i].seq < w[j].seq)
}
func (w wakeups) Swap(i, j int) { w[i], w[j] = w[j], w[i] }
func (w *wakeups) Push(x any)   { *w = append(*w, x.(wakeup)) }
func (w *wakeups) Pop() any {
	old := *w
	x := old[len(old)-1]
	*w = old[:len(old)-1]
	return x
}

func newSim() *sim { return &sim{idle: make(chan struct{})} }

// Now is the virtual time.
func (s *sim) Now() time.Time { return epoch.Add(s.now) }

// Elapsed is the virtual time since epoch.
func (s *sim) Elapsed() time.Duration { return s.now }

// GoAt starts fn on a new proc at virtual time at (not before now). It may
// be called before run, or by the proc that runs.
func (s *sim) GoAt(at time.Duration, fn func(p *proc)) {
	p := &proc{s: s, wake: make(chan struct{}, 1)}
	s.live++
	s.schedule(max(at, s.now), p)
	go func() {
		<-p.wake
		fn(p)
		s.exit()
	}()
}

// Go starts fn on a new proc now.
func (s *sim) Go(fn func(p *proc)) { s.GoAt(s.now, fn) }

func (s *sim) schedule(at time.Duration, p *proc) {
	heap.Push(&s.queue, wakeup{at: at, seq: s.seq, gen: p.gen, p: p})
	s.seq++
}

// dropStale pops the wake-ups that an early one made stale off the top of
// the queue; only hedged runs make any.
func (s *sim) dropStale() {
	for s.queue.Len() > 0 && s.queue[0].gen != s.queue[0].p.gen {
		heap.Pop(&s.queue)
	}
}

// run runs the procs until every one has returned, and fails if some are
// left asleep with nothing to wake them. It is called once, by the
// goroutine that built the simulation.
func (s *sim) run() error {
	if s.queue.Len() == 0 {
		return nil
	}
	s.resume()
	<-s.idle
	if s.live > 0 {
		return fmt.Errorf("retrysim: %d simulated goroutines are blocked outside virtual time", s.live)
	}
	return nil
}

// resume hands the run to the earliest wake-up; the caller must then
// stop touching the simulation.
func (s *sim) resume() {
	s.dropStale()
	w := heap.Pop(&s.queue).(wakeup)
	s.now, s.current = w.at, w.p
	w.p.wake <- struct{}{}
}

// exit ends the current proc: the next one runs, or run returns.
func (s *sim) exit() {
	s.yielding()
	s.live--
	if s.dropStale(); s.queue.Len() == 0 {
		s.current = nil
		s.idle <- struct{}{}
		return
	}
	s.resume()
}

// Sleep parks p for d of virtual time; the procs due before then run
// meanwhile.
func (p *proc) Sleep(d time.Duration) {
	s := p.s
	s.yielding()
	s.schedule(s.now+max(d, 0), p)
	if s.dropStale(); s.queue[0].p == p { // no one is due before p: go on at once
		w := heap.Pop(&s.queue).(wakeup)
		s.now = w.at
		return
	}
	s.resume()
	<-p.wake
}

func (p *proc) timerOf(c *vclock) *clock.Timer {
	for _, o := range p.timers {
		if o.owner == c {
			return o.t
		}
	}
	return nil
}

func (p *proc) setTimer(c *vclock, t *clock.Timer) {
	for i := range p.timers {
		if p.timers[i].owner == c {
			p.timers[i].t = t
			return
		}
	}
	p.timers = append(p.timers, ownedTimer{c, t})
}

// vclock is the clock.Clock that a Retrier waits on in the simulation.
// Give each Retrier in a stack of nested ones a clock of its own: a
// clock serves one call per proc at a time.
//
// A Retrier arms its wait's timer with Timer, then calls WaitArmed on the
// waiting proc before it blocks on the timer (see retry.WithClock);
// WaitArmed sleeps the wait in virtual time and then fires the timer, so
// that the Retrier's select finds it ready. The timer is a real one
// (clock.Timer has no other implementation outside its package that Do
// could Reset) fired by Reset(0); if it also fires on its own meanwhile,
// nothing changes, since the proc that waits holds the run.
type vclock struct {
	s    *sim
	real clock.Clock
}

var _ clock.Clock = (*vclock)(nil)

// Clock returns a new clock on s's virtual time.
func (s *sim) Clock() *vclock { return &vclock{s: s, real: clock.New()} }

func (c *vclock) Now() time.Time                  { return c.s.Now() }
func (c *vclock) Since(t time.Time) time.Duration { return c.s.Now().Sub(t) }
func (c *vclock) Until(t time.Time) time.Duration { return t.Sub(c.s.Now()) }
func (c *vclock) Sleep(d time.Duration)           { c.s.current.Sleep(d) }

// Timer returns a timer that WaitArmed fires once the wait has passed in
// virtual time.
func (c *vclock) Timer(d time.Duration) *clock.Timer {
	t := c.real.Timer(d)
	c.s.current.setTimer(c, t)
	return t
}

// WaitArmed is called by Do on the waiting proc: it sleeps d, then fires
// the timer of this clock's call on the proc.
func (c *vclock) WaitArmed(d time.Duration) {
	if d <= 0 {
		return
	}
	p := c.s.current
	p.Sleep(d)
	if t := p.timerOf(c); t != nil {
		t.Reset(0)
	}
}

// AfterFunc starts f on a proc of its own once d has passed in virtual
// time: a hedged call's timer (see vhedge.go).
func (c *vclock) AfterFunc(d time.Duration, f func()) *clock.Timer { return c.s.afterFunc(d, f) }

// WithTimeout is what a Retrier with WithAttemptTimeout gives each
// attempt's fn: a context whose deadline is d from now in virtual time
// (see deadlineCtx).
func (c *vclock) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return c.WithDeadline(parent, c.Now().Add(d))
}

// WithDeadline returns a context of parent that ends at t in virtual
// time. Its parent must be one that never ends, such as the
// context.Background of the scenarios' calls of Do.
func (c *vclock) WithDeadline(parent context.Context, t time.Time) (context.Context, context.CancelFunc) {
	if _, ok := parent.Deadline(); ok || parent.Err() != nil {
		panic(unsupported("deadline under a context that ends"))
	}
	ctx := &deadlineCtx{Context: parent, s: c.s, deadline: t}
	return ctx, ctx.cancel
}

// deadlineCtx is a context that ends at a deadline in virtual time, or
// when cancelled. An attempt's fn reads its deadline and sleeps no
// further (see downstream.attemptWithin), then returns its Err; no one
// may wait on Done, which a virtual deadline cannot close: it panics,
// as the unmodelled methods of the clock do.
type deadlineCtx struct {
	context.Context // one that never ends
	s               *sim
	deadline        time.Time
	err             error // the first of the deadline and cancel
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Err() error {
	if c.err == nil && !c.s.Now().Before(c.deadline) {
		c.err = context.DeadlineExceeded
	}
	return c.err
}

func (c *deadlineCtx) Done() <-chan struct{} { panic(unsupported("Done of an attempt's context")) }

func (c *deadlineCtx) cancel() {
	if c.Err() == nil {
		c.err = context.Canceled
	}
}

// The rest of clock.Clock is not used by the Retriers of the simulation
// (the budgets read only Now): a call would mean that the library started
// to measure time in a new way, which the simulation must then learn.

func (c *vclock) After(time.Duration) <-chan time.Time { panic(unsupported("After")) }
func (c *vclock) Tick(time.Duration) <-chan time.Time  { panic(unsupported("Tick")) }
func (c *vclock) Ticker(time.Duration) *clock.Ticker   { panic(unsupported("Ticker")) }

func unsupported(method string) string {
	return "retrysim: the virtual clock has no " + method + "; the simulation must model it first"
}
