package retry

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/steadfast-go/retry/internal/clocks"
	"github.com/steadfast-go/retry/overload"
)

// A hedged call (WithHedge) runs its attempts in rounds, one per turn of
// the loop: the round's first attempt runs fn on the caller's goroutine,
// as any attempt does, with a timer armed for the hedge delay. If fn has
// not returned when it fires, the timer's goroutine starts the next
// attempt beside it, and arms the timer again, up to the attempts allowed.
// The first success wins; a failure that ends the call ends them all; a
// failure worth retrying lets the others run. A hedge runs its attempt's
// hooks itself, on its goroutine: the observer's start and end, the
// breaker's and the budget's word, its own attempt timeout. The caller's
// goroutine, once its fn has returned, waits for the round to be decided
// (hooks.awaitRound), and the loop goes on with its result.
//
// What a call answered within the delay costs is kept near a hand-written
// hedge's (BENCHMARKS.md, "Hedged calls"), one trick to a line:
//   - The entry point starts the call (startHedgedCall), high on the
//     caller's stack: the round's context is made and its timer armed
//     there, not under runCall and oneAttempt, where the allocator's and
//     the timer heap's frames would grow a call parked in fn past its
//     first 2 KB stack. For the same reason the loop's state is on the
//     heap, not in the entry point's frame. Only a first attempt that
//     nothing can hold back (no idempotency claim, limit, rate or pause)
//     is prepared so; any other round arms its timer as it begins. If user
//     code runs before that attempt (an observer, a breaker), its start
//     is read, and a timer that fires early waits out the delay's rest.
//   - Hedges read the loop's own call, not a copy: only its cfg, ctx,
//     start and wait.prev, which the loop leaves alone while a hedge runs
//     or is being admitted (awaitRound waits for both).
//   - A call whose round sent no hedge (its timer stopped unfired: no
//     goroutine knows it) goes back to its Retrier's pool, with the method
//     value that the timer calls: a call then makes only its context and
//     its timer. Its pointers are overwritten by the next call, not
//     cleared: each write costs a barrier while the GC marks.
//   - Hedge's fn is kept as it was given, not in a closure (callFn).

// hedgeRound is a round of a hedged call and the hedges it started.
type hedgeRound[T any] struct {
	mu   sync.Mutex
	fire func() // r.onTimer, made once: a round reused keeps it
	// The call: hedges read its cfg, ctx, start and wait.prev, which the
	// loop leaves alone while they run (and it is not reused while one
	// may, see fired), and call its fn.
	c  *call
	fn any // func(context.Context) (T, error), or Hedge's func(context.Context) error

	// The round's own. A round reused sets them anew as it is armed
	// (arm); wake, v, err and panicked are set only by a hedge, and a
	// round a hedge touched is not reused.
	base     context.Context            // the hedges' parent if not the call's: its idempotency claim's
	first    context.Context            // the first attempt's: nil if the round sends no hedge
	cancel   context.CancelCauseFunc    // first's
	timer    clocks.FuncTimer           // armed for the next hedge
	cancels  []context.CancelCauseFunc  // each hedge's
	room     [2]context.CancelCauseFunc // cancels' first backing array: default attempts cost no allocation
	wake     chan struct{}              // made once awaitRound waits for a hedge: one ended, it looks again
	v        T                          // the winning hedge's value
	err      error                      // the latest failure of a hedge
	panicked any                        // a hedge's fn, or a hook on its goroutine, panicked with this
	roundState
}

// roundState is a round's state that holds no pointer: a round reused
// clears it with one store that the garbage collector need not watch.
type roundState struct {
	delay      time.Duration // the hedge delay
	start      time.Duration // when the first attempt began, since the call's start, if timed
	winStart   time.Duration // the winning hedge's start, since the call's: the caller tells the observer its end
	next       int           // the number of the next hedge's attempt
	dec        decision      // the policy's decision on err, for the hedge
	prepared   bool          // first and timer are made (or the round sends no hedge)
	begun      bool          // the first attempt began
	armed      bool          // the timer will call fire
	early      bool          // armed before the first attempt began (startHedgedCall), until it fires
	armedEarly bool          // early, as armed: the timer never changes it, so the caller reads it unlocked
	timed      bool          // start is read: user code (an observer, a breaker) ran between, or the delay is adaptive
	due        bool          // it fired before the first attempt began: its start arms it again
	fired      bool          // fire ran, or will: a hedge may hold the round and the call, not reused
	quiet      bool          // decided by the caller, the timer stopped unfired: no other goroutine can touch r
	firstIn    bool          // the first attempt's fn has not returned
	closed     bool          // decided: no hedge starts, the ones running lost
	cancelled  bool          // the attempts' contexts were cancelled, by whoever closed the round
	won        bool          // a hedge succeeded with v
	failed     bool          // a hedge's failure, err, is the latest
	fatal      bool          // it ends the call
	inFlight   int32         // hedges whose fn has not returned
	admitting  int32         // hedges being admitted: they read the call, which the loop leaves alone until they are done
	from       int32         // the attempt number of the hedge that won, or whose failure err is
}

// hedgedCall is a call of Hedge or HedgeValue: the loop's state, on the
// heap (the entry point's frame is under fn on a parked call's stack),
// and the call's first round. A call whose one round sent no hedge goes
// back to its Retrier's pool, whole (see the notes above).
type hedgedCall[T any] struct {
	c     call
	first hedgeRound[T]
}

// startHedgedCall starts a call of fn on cfg (the config of a Retrier's
// Hedge, nil without WithHedge) and ctx, from the pool of cfg's hedge
// setting, and arms its first round if nothing can hold its first
// attempt back (see the notes above). The entry point calls it, high on
// the caller's stack, and runs the call itself: a frame less between it
// and fn keeps a call parked in fn within its first 2 KB stack.
func startHedgedCall[T any](cfg *config, ctx context.Context, fn any) (*hedgedCall[T], error) {
	if cfg == nil {
		return nil, errNoHedge()
	}
	hc, ok := cfg.hedge.calls.Get().(*hedgedCall[T])
	if !ok { // none, or one of a call with another T, which the GC takes
		hc = new(hedgedCall[T])
		hc.first.fire, hc.first.c, hc.c.hedges = hc.first.onTimer, &hc.c, &hc.first
	}
	if hc.c.cfg != cfg {
		hc.c.cfg = cfg
	}
	hc.c.ctx, hc.first.fn = ctx, fn
	if cfg.features&(featIdempotency|featAdmit) == 0 {
		hc.first.arm(cfg, ctx, 1, true)
	}
	return hc, nil
}

// errNoHedge is the error of Hedge on a Retrier without WithHedge, out of
// line: its arguments would take room in a frame under fn.
//
//go:noinline
func errNoHedge() error {
	return fmt.Errorf("%w: the Retrier has no WithHedge; add it for work that is safe to run twice at once", ErrInvalidOption)
}

// endHedgedCall ends the call hc when it returns: its last round is ended
// if awaitRound did not, and a call whose one round no goroutine holds
// goes back to the pool.
func endHedgedCall[T any](hc *hedgedCall[T]) {
	r := &hc.first
	if !r.quiet {
		if held := abandonRound[T](&hc.c); held || hc.c.hedges.(*hedgeRound[T]) != r {
			return // a goroutine may hold the call
		}
	}
	c := &hc.c
	*c = call{cfg: c.cfg, hedges: r}
	r.roundState = roundState{}
	c.cfg.hedge.calls.Put(hc)
}

// arm makes the round's first attempt's context, a child of parent, and
// arms the timer for the hedge delay, unless the round sends no hedge: the
// delay is not known yet, or its first attempt, number first, is the
// last allowed. early says that attempt has not begun.
func (r *hedgeRound[T]) arm(cfg *config, parent context.Context, first int, early bool) {
	r.prepared = true
	d, hedge := cfg.hedge.nextDelay()
	if !hedge || first >= cfg.maxAttempts {
		if r.first != nil {
			r.first, r.cancel = nil, nil
		}
		return
	}
	r.first, r.cancel = context.WithCancelCause(parent)
	r.delay = d
	r.mu.Lock() // the timer may fire before afterFunc returns
	r.armedEarly = early
	r.timer, r.armed, r.early = cfg.afterFunc(d, r.fire), true, early
	r.mu.Unlock()
}

// startRound begins the round of the call c's attempt a, whose fn is about
// to run on base (the call's context, with its idempotency claim), and
// returns fn's context: the round's, which its end cancels, or base for a
// round that sends no hedge. The call's first round was prepared as it
// started, if it could be; a later one is made here, reusing the last if
// no goroutine holds it.
func startRound[T any](c *call, a *attemptState, base context.Context) context.Context {
	r := c.hedges.(*hedgeRound[T])
	if r.begun {
		r = r.renewed()
		c.hedges = r
	}
	if !r.prepared {
		r.arm(c.cfg, base, c.attempts, false)
	}
	if base != c.ctx {
		r.base = base
	} else if r.base != nil {
		r.base = nil
	}
	a.number = attemptNumber(c.attempts)
	if c.cfg.hedge.lat != nil || r.armedEarly && c.cfg.features&(featObserver|featBreaker) != 0 {
		// Read only then: a timer armed early is off by the few hooks of
		// the library alone, which a hedge's delay need not see.
		r.start, r.timed = c.cfg.clockReading(), true
	}
	r.mu.Lock()
	r.begun, r.firstIn, r.next = true, true, c.attempts+1
	if r.due {
		r.due = false
		r.rearmLocked(r.delay)
	}
	r.mu.Unlock()
	if r.first == nil {
		return base
	}
	return r.first
}

// firstReturned tells the round that its first attempt's fn returned,
// and says whether the round sends hedges. Only first attempts teach the
// adaptive delay: it is the latency past which 1-Percentile of them are,
// and so the share of calls that hedge. One that lost counts with the
// time it ran.
func (r *hedgeRound[T]) firstReturned() bool {
	if cfg := r.c.cfg; cfg.hedge.lat != nil {
		cfg.hedge.record(cfg.clockReading() - r.start)
	}
	return r.first != nil
}

// wonAlone decides the round whose first attempt succeeded before the
// timer fired, as most do: the timer is stopped and the round's context
// cancelled. false: the timer fired, and awaitRound decides.
func (r *hedgeRound[T]) wonAlone() bool {
	r.mu.Lock()
	if r.fired {
		r.mu.Unlock()
		return false
	}
	r.firstIn = false
	r.closeLocked()
	r.quiet = !r.fired // else it fires all the same, and finds r closed
	cancel := r.takeCancelsLocked()
	r.mu.Unlock()
	if cancel {
		r.cancelAttempts()
	}
	return true
}

// renewed is the round that follows r, decided: r itself, made anew, if
// no goroutine holds it, else a new one.
func (r *hedgeRound[T]) renewed() *hedgeRound[T] {
	r.mu.Lock()
	held := r.fired
	r.mu.Unlock()
	if held {
		next := &hedgeRound[T]{c: r.c, fn: r.fn}
		next.fire = next.onTimer
		return next
	}
	r.roundState = roundState{}
	return r
}

// takeCancelsLocked says whether the caller, who closed the round, is to
// cancel its attempts' contexts (cancelAttempts, once r.mu is released):
// the first to ask after it closed. Called with r.mu held.
func (r *hedgeRound[T]) takeCancelsLocked() bool {
	if !r.closed || r.cancelled {
		return false
	}
	r.cancelled = true
	return true
}

// cancelAttempts cancels the contexts of the round's attempts, with the
// cause ErrHedgeLost, once it is closed: no hedge is added after that.
func (r *hedgeRound[T]) cancelAttempts() {
	if r.cancel != nil {
		r.cancel(ErrHedgeLost)
	}
	for _, cancel := range r.cancels {
		cancel(ErrHedgeLost)
	}
}

// hedgeParent is the parent of the round's hedges' contexts.
func (r *hedgeRound[T]) hedgeParent() context.Context {
	if r.base != nil {
		return r.base
	}
	return r.c.ctx
}

// waitDecided waits, with r.mu held, until the round is decided or no
// hedge runs any more, and closes it; ctxEnded says the call's context
// ended it first.
func (r *hedgeRound[T]) waitDecided(ctx context.Context) (ctxEnded bool) {
	for !r.closed && (r.inFlight > 0 || r.admitting > 0) {
		if r.wake == nil {
			r.wake = make(chan struct{}, 1)
		}
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
		}
		r.mu.Lock()
		if ctx.Err() != nil && !r.closed {
			r.closeLocked()
			r.failed = false
			ctxEnded = true
		}
	}
	if !r.closed {
		r.closeLocked() // all have failed
	}
	return ctxEnded
}

// abandonRound ends the call c's round if awaitRound did not: the
// caller's goroutine is unwinding a panic, or the call ended before the
// round's first attempt. The attempts still running are cancelled, and no
// new one starts; held says a goroutine may hold the round still.
func abandonRound[T any](c *call) (held bool) {
	r := c.hedges.(*hedgeRound[T])
	r.mu.Lock()
	if !r.closed {
		r.closeLocked()
	}
	cancel := r.takeCancelsLocked()
	held = r.fired
	r.mu.Unlock()
	if cancel {
		r.cancelAttempts()
	}
	return held
}

// retryWorthyError is an attempt's error that WithRetryIf has judged worth
// another attempt already, decided on again with the call's count.
type retryWorthyError struct{ error }

func (e retryWorthyError) Unwrap() error { return e.error }
func (retryWorthyError) alwaysRetried()  {}

// closeLocked decides the round: no hedge starts after it, and the
// attempts still running are cancelled by whoever called it, once r.mu is
// released. Called with r.mu held.
func (r *hedgeRound[T]) closeLocked() {
	r.closed = true
	if r.armed {
		if !r.timer.Stop() {
			r.fired = true // it fires all the same, and finds r closed
		}
		r.armed = false
	}
}

// rearmLocked arms the timer to start the next hedge after d, if attempts
// are left. Called with r.mu held.
func (r *hedgeRound[T]) rearmLocked(d time.Duration) {
	if r.next <= r.c.cfg.maxAttempts {
		r.timer.Reset(d)
		r.armed = true
	}
}

// hedgeNowLocked starts the next hedge at once, as A6 does after a
// failure worth retrying, while another attempt still runs and attempts
// are left: the delay guesses that an attempt is slow, a failure says so.
// Once none runs, the round is over and the loop's backoff comes first.
// Called with r.mu held.
func (r *hedgeRound[T]) hedgeNowLocked() {
	if !r.closed && (r.firstIn || r.inFlight > 0) {
		r.rearmLocked(0)
	}
}

// hedge is one hedge's own state, on its goroutine: with its attempt
// hooks' (attempt.go), as the loop's attempt has.
type hedge struct {
	k         int                     // its attempt's number
	a         attemptState            // the attempt timeout's and the observer's
	g         attemptGuard            // the breaker's and the budget's
	admitting bool                    // in r.admitting
	counted   bool                    // in r.inFlight
	uncounted bool                    // out of it again
	cancel    context.CancelCauseFunc // its context's
}

// onTimer starts a hedge, on the timer's goroutine, if the round is open,
// its first attempt has begun a delay ago (else the timer is armed again
// for the rest), attempts are left, and the breaker and the budget allow a
// retry now. A panic on
// this goroutine, in fn or in a hook, reaches the caller while it waits
// for the round (see panicked). Its frame and callFn's are all the
// library keeps under fn on the hedge's stack.
func (r *hedgeRound[T]) onTimer() {
	var h hedge
	defer func() {
		if p := recover(); p != nil {
			r.panickedOut(&h, p)
		}
	}()
	if ctx := r.startHedge(&h); ctx != nil {
		v, err, panicked := callFn[T](r.fn, ctx)
		r.hedgeReturned(&h, v, err, panicked)
	}
}

// startHedge starts hedge h, if the round lets it (see onTimer): it
// counts it in the round, runs its hooks up to fn and returns its
// context; nil: no hedge now, and none later in the round.
func (r *hedgeRound[T]) startHedge(h *hedge) context.Context {
	c := r.c
	r.mu.Lock()
	r.armed, r.fired = false, true
	if r.early && !r.closed {
		r.early = false
		if !r.begun {
			r.due = true // startRound arms the timer for the whole delay
			r.mu.Unlock()
			return nil
		}
		if r.timed {
			if rest := r.start + r.delay - c.cfg.clockReading(); rest > 0 {
				r.rearmLocked(rest) // user code held the first attempt back
				r.mu.Unlock()
				return nil
			}
		}
	}
	closed := r.closed || r.next > c.cfg.maxAttempts
	h.k = r.next
	if !closed {
		r.admitting++
		h.admitting = true
	}
	r.mu.Unlock()
	if closed {
		return nil
	}
	// Leave to retry now, as the loop asks before a wait, then the
	// attempt's own admission. No hedge goes to a paused downstream.
	h.a.number = attemptNumber(h.k)
	parent := r.hedgeParent()
	var ctx context.Context
	refused := mayRetry(c.cfg, 0) != nil || c.cfg.pause.Hold(parent, nil) > 0 || h.g.admit(c, &h.a, overload.HedgeAttempt) != nil
	if !refused {
		ctx, h.cancel = context.WithCancelCause(parent)
		ctx = attemptContext(c, &h.a, ctx)
	}
	r.mu.Lock()
	r.admitting--
	h.admitting = false
	if closed = refused || r.closed; !closed {
		r.next++
		r.inFlight++
		h.counted = true
		if r.cancels == nil {
			r.cancels = r.room[:0]
		}
		r.cancels = append(r.cancels, h.cancel)
		r.rearmLocked(r.delay)
	}
	wake := r.wake
	r.mu.Unlock()
	if closed {
		wakeDecider(wake)
		if !refused { // admitted, but the round was decided meanwhile
			h.cancel(nil)
			h.a.cancelContext()
			h.g.judge(c.cfg, h.k, ErrHedgeLost, judgedNotCounted, false)
		}
		return nil // refused: no hedge now, and none later in the round
	}
	startAttempt(c, &h.a, 0)
	return ctx
}

// hedgeReturned ends hedge h, whose fn returned v and err, or panicked,
// and tells the round how it ended.
func (r *hedgeRound[T]) hedgeReturned(h *hedge, v T, err error, panicked any) {
	c := r.c
	var end time.Duration
	if panicked == nil {
		finishAttempt(c, &h.a, &h.g, h.k, err)
	}
	if err != nil || panicked != nil {
		e := err
		if panicked != nil {
			e = errPanicked
		}
		endAttempt(c, &h.a, e, &end)
	}
	if panicked != nil {
		panic(panicked) // onTimer's recover hands it on, fn's end told
	}
	var dec decision
	if err != nil {
		dec = c.decideFor(h.k, c.wait.prev, err, c.cfg.maxAttempts)
	}
	lost := r.ended(h, v, err, dec)
	if err == nil && lost {
		// A winner's end is told by the caller, once idempotency has
		// recorded the outcome, as a plain attempt's is.
		endAttempt(c, &h.a, nil, &end)
	}
	h.cancel(nil)
	switch { // a success was judged when fn returned
	case lost && err == nil:
		discard(v)
	case lost:
		h.g.judge(c.cfg, h.k, err, judgedNotCounted, false)
	case err != nil:
		h.g.judge(c.cfg, h.k, err, judged(dec.verdict), dec.hinted)
	}
}

// callFn calls fn, the call's, and returns what it panicked with instead
// of panicking: the hedge tells the hooks of its end first. fn is Hedge's
// as it was given, or HedgeValue's.
func callFn[T any](fn any, ctx context.Context) (v T, err error, panicked any) {
	returned := false
	defer func() {
		if !returned {
			panicked = recover()
		}
	}()
	if f, ok := fn.(func(context.Context) error); ok {
		err = f(ctx)
	} else {
		v, err = fn.(func(context.Context) (T, error))(ctx)
	}
	returned = true
	return v, err, nil
}

// ended tells the round that hedge h's attempt ended with v and err, on
// on which the policy decided dec: a success wins, a fatal failure ends the
// round, another sends the next hedge at once; the others are cancelled
// if the round is decided. lost says it was decided already.
func (r *hedgeRound[T]) ended(h *hedge, v T, err error, dec decision) (lost bool) {
	r.mu.Lock()
	r.inFlight--
	h.uncounted = true
	lost = r.closed
	cancel := false
	if !lost {
		switch {
		case err == nil:
			r.won, r.v, r.from, r.winStart = true, v, attemptNumber(h.k), h.a.start
			r.closeLocked()
		default:
			r.failed, r.err, r.dec, r.from = true, err, dec, attemptNumber(h.k)
			if r.fatal = endsRound(dec.verdict); r.fatal {
				r.closeLocked()
			} else {
				r.hedgeNowLocked()
			}
		}
		// Cancel the others now if decided: Do's goroutine may be in fn.
		cancel = r.takeCancelsLocked()
	}
	wake := r.wake
	r.mu.Unlock()
	if cancel {
		r.cancelAttempts()
	}
	wakeDecider(wake)
	return lost
}

// panickedOut ends hedge h, whose fn or a hook on its goroutine panicked
// with p: the breaker hears a failure, as Do's unwind tells it (the budget
// hears nothing of a panic), and the round ends with p, which awaitRound
// raises on the caller's goroutine. A hedge that lost raises p on its
// own: nobody waits for it any more.
func (r *hedgeRound[T]) panickedOut(h *hedge, p any) {
	h.g.abort(r.c.cfg)
	r.mu.Lock()
	if h.admitting {
		r.admitting--
	}
	if h.counted && !h.uncounted {
		r.inFlight--
	}
	lost := r.closed
	cancel := false
	if !lost {
		r.panicked = p
		r.closeLocked()
		cancel = r.takeCancelsLocked()
	}
	wake := r.wake
	r.mu.Unlock()
	if cancel {
		r.cancelAttempts()
	}
	if h.cancel != nil {
		h.cancel(nil)
	}
	h.a.cancelContext()
	wakeDecider(wake)
	if lost {
		panic(p)
	}
}

// wakeDecider tells awaitRound, if it waits on wake (read under r.mu as
// the hedge ended), that a hedge ended.
func wakeDecider(wake chan struct{}) {
	select {
	case wake <- struct{}{}: // nil: awaitRound has not waited yet, and will look first
	default: // awaitRound will look anyway
	}
}

// endsRound says whether a failure with verdict v ends a hedged attempt
// and the others with it: A6's fatal status. One worth retrying, or
// whose call has no attempts or time left for another, lets the others
// run.
func endsRound(v verdict) bool {
	switch v {
	case waitAndRetry, stopExhausted, stopMaxElapsed, stopDeadline:
		return false
	}
	return true
}

// discard closes a losing attempt's value, if it is an io.Closer.
func discard[T any](v T) {
	if c, ok := any(v).(io.Closer); ok {
		_ = c.Close()
	}
}
