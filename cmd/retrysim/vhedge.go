package main

import (
	"context"
	"reflect"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"github.com/benbjohnson/clock"
)

// Hedged calls (retry.WithHedge) in virtual time. A hedged call runs on
// more goroutines than its caller's and blocks where the simulation cannot
// see, so the scheduler models the three things the library does there
// (hedge_round.go), and nothing else of it:
//
//   - The hedge timer. The Retrier starts a hedge on a goroutine of its
//     clock's AfterFunc: here, a proc due when the timer is. The
//     *clock.Timer returned is one of a clock.Mock of its own that never
//     moves, so it never fires by itself; the library's Stop and Reset
//     change its state, which the proc reads when it is due (stopped: it
//     does nothing) and when the f it fired first yields (armed again:
//     another proc is due after the Reset's duration). A fired timer is
//     stopped first, as a real one that fired is inactive, so that a Reset
//     shows. Only the Reset made by f, before it first yields, is seen;
//     the library makes no other.
//   - Cancellation. An attempt that lost (its context cancelled, with
//     cause retry.ErrHedgeLost) ends at once if its fn returns when its
//     context ends, as WithHedge asks. Contexts are cancelled only by the
//     library's code on the proc that runs, right after an attempt of
//     the round returned or the caller went on settling it, so before
//     each proc yields the scheduler wakes, at the same instant, the
//     sleepers of the rounds touched in its step whose context ended.
//   - Settling. The caller's goroutine, once its own attempt failed while
//     hedges run, waits on the round's channel until one of them ends:
//     invisible to the scheduler. The call's context is the simulation's
//     (sim.Context), whose Done the library calls right before it blocks there;
//     Done parks the caller's proc until a hedge of its round has ended,
//     and so has sent on the channel, then returns, so that the
//     library's select never blocks. The round's channel and its counts
//     are mirrored from what the attempts' fns see (round): an attempt
//     is a hedge iff it runs on a timer's proc, and no attempt fails in a
//     way that ends the round (the scenarios' errors are all worth
//     retrying). Done checks that its caller is the library's waitDecided.
//
// The other way, a clock.Mock advanced when runtime/metrics say every
// goroutine of the scenario is blocked, was not taken: the Mock sleeps
// 1 ms of real time at every timer it fires, the counts are the whole
// process's (the tests and the other scenarios' runs go on in parallel),
// and reading them stable is a heuristic; this way a run is still one
// proc at a time, a function of its seed alone.

// round is what the simulation knows of a hedged attempt and its hedges.
type round struct {
	owner    *proc // the caller's proc: the first attempt, and the settling
	inFlight int   // attempts whose fn has not returned
	token    bool  // the round's wake channel (capacity 1) holds a value
	decided  bool  // an attempt succeeded: the round is closed
	parked   bool  // the owner waits in settle for a hedge to end
	sleepers []*ctxSleep
}

// ctxSleep is an attempt of a round sleeping until its context ends.
type ctxSleep struct {
	p     *proc
	ctx   context.Context
	woken bool
}

// vtimer is an AfterFunc timer of a vclock.
type vtimer struct {
	t     *clock.Timer
	f     func()
	round *round
}

// mockEpoch is where a clock.Mock's time starts, and stays for a vtimer's.
var mockEpoch = time.Unix(0, 0)

// afterFunc is vclock.AfterFunc: the Retrier calls it on the caller's
// proc right before the round's first attempt.
func (s *sim) afterFunc(d time.Duration, f func()) *clock.Timer {
	p := s.current
	rd := &round{owner: p}
	p.round = rd
	vt := &vtimer{t: clock.NewMock().AfterFunc(d, func() {}), f: f, round: rd}
	s.GoAt(s.now+d, vt.fire)
	return vt.t
}

// fire runs on a proc of its own when the timer is due.
func (vt *vtimer) fire(tp *proc) {
	if armed, _ := timerState(vt.t); !armed {
		return // stopped
	}
	vt.t.Stop()
	tp.round, tp.firing, tp.hedge = vt.round, vt, true
	vt.f()
}

// timerState reads a Mock's timer: whether it is armed, and when it is due
// on the Mock's clock. clock.Timer has no accessor for either, and its
// Stop and Reset no hook; the fields are read, never written.
func timerState(t *clock.Timer) (armed bool, next time.Time) {
	v := reflect.ValueOf(t).Elem()
	armed = !v.FieldByName("stopped").Bool()
	next = *(*time.Time)(unsafe.Pointer(v.FieldByName("next").UnsafeAddr()))
	return armed, next
}

// touch notes that rd's attempts' contexts may have ended in this step.
func (s *sim) touch(rd *round) { s.touched = append(s.touched, rd) }

// yielding is called before the running proc yields: it starts the
// timer its f armed again, and wakes the sleepers whose context ended.
func (s *sim) yielding() {
	p := s.current
	if p != nil && p.firing != nil {
		vt := p.firing
		p.firing = nil
		if armed, next := timerState(vt.t); armed {
			s.GoAt(s.now+next.Sub(mockEpoch), vt.fire)
		}
	}
	for _, rd := range s.touched {
		keep := rd.sleepers[:0]
		for _, z := range rd.sleepers {
			if z.ctx.Err() == nil {
				keep = append(keep, z)
				continue
			}
			z.woken = true
			z.p.gen++ // its wake-up at the end of the sleep is stale
			s.schedule(s.now, z.p)
		}
		clear(rd.sleepers[len(keep):])
		rd.sleepers = keep
	}
	clear(s.touched)
	s.touched = s.touched[:0]
}

// sleepCtx sleeps d as attempt of rd, or until ctx ends if that comes
// first, and says whether it did; without a round it is Sleep.
func (p *proc) sleepCtx(rd *round, ctx context.Context, d time.Duration) (ended bool) {
	if rd == nil {
		p.Sleep(d)
		return false
	}
	if ctx.Err() != nil {
		return true
	}
	z := &ctxSleep{p: p, ctx: ctx}
	rd.sleepers = append(rd.sleepers, z)
	p.Sleep(d)
	if z.woken {
		return true
	}
	for i, y := range rd.sleepers {
		if y == z {
			rd.sleepers = append(rd.sleepers[:i], rd.sleepers[i+1:]...)
			break
		}
	}
	return false
}

// park suspends p outside the queue, until another proc schedules it.
func (p *proc) park() {
	s := p.s
	s.yielding()
	if s.dropStale(); s.queue.Len() == 0 {
		s.current = nil
		s.idle <- struct{}{} // run reports p as blocked
		<-p.wake
		return
	}
	s.resume()
	<-p.wake
}

// attempt runs body as one attempt of a call on the proc that runs it
// (the caller's, or a hedge timer's), with its round if it is hedged,
// and keeps the round's counts; body returns the attempt's error.
func (s *sim) attempt(body func(p *proc, rd *round) error) error {
	p := s.current
	rd := p.round
	if !p.hedge {
		p.round = nil // the caller's next attempt has a round only if AfterFunc makes one
	}
	if rd != nil {
		rd.inFlight++
	}
	err := body(p, rd)
	if rd == nil {
		return err
	}
	rd.inFlight--
	s.touch(rd)
	if err == nil {
		rd.decided = true
	}
	switch {
	case p.hedge:
		rd.token = true // the hedge's run sends on the round's channel
		if rd.parked {
			rd.parked = false
			s.schedule(s.now, rd.owner)
		}
	case err != nil && !rd.decided && rd.inFlight > 0:
		p.settling = rd // the library waits for a hedge now
	}
	return err
}

// callCtx is the context of the simulation's hedged calls (sim.Context):
// never done, and whose Done lets the library's settle wait in virtual
// time.
type callCtx struct{ s *sim }

var _ context.Context = callCtx{}

// Context returns the context for the hedged calls of s.
func (s *sim) Context() context.Context { return callCtx{s} }

func (callCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (callCtx) Err() error                  { return nil }
func (callCtx) Value(any) any               { return nil }

// Done returns nil, a channel that never delivers: the context never
// ends, and contexts derived from it start no goroutine to watch it.
func (c callCtx) Done() <-chan struct{} {
	if p := c.s.current; p != nil && p.settling != nil {
		c.s.settleWait(p)
	}
	return nil
}

// settleWait is called by the library's waitDecided (the hedged round's
// wait in settle), on the caller's proc p, right before it waits for a
// hedge of the round to end: it returns once one has.
func (s *sim) settleWait(p *proc) {
	rd := p.settling
	if pc, _, _, ok := runtime.Caller(2); !ok || !strings.HasSuffix(runtime.FuncForPC(pc).Name(), ").waitDecided") {
		panic("retrysim: a hedged call asked its context's Done where the simulation does not model it; see vhedge.go")
	}
	if !rd.token {
		rd.parked = true
		p.park()
	}
	rd.token = false
	s.touch(rd) // settle may cancel the others before p yields
	if rd.decided || rd.inFlight == 0 {
		p.settling = nil // settle stops waiting
	}
}
