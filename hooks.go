package retry

import (
	"context"
	"time"
)

// The features implement the seam.
var (
	_ hook[struct{}] = (*observing[struct{}])(nil)
	_ hook[struct{}] = (*guarding[struct{}])(nil)
	_ hook[struct{}] = timingOut[struct{}]{}
	_ hook[struct{}] = (*idemCall[struct{}])(nil)
	_ hook[struct{}] = (*deadLettering[struct{}])(nil)
	_ hook[struct{}] = (*handingOff[struct{}])(nil)
)

// hooks are the features of one call, in the order they run; the call's
// config.features says which are on, and with none the loop calls nothing
// here. The loop reaches them through these concrete fields rather than a
// []hook[T]: a *call passed to an interface method escapes to the heap,
// and Do must not allocate. A new feature implements hook[T], takes a
// field and a bit, and a line in each method below that it needs.
type hooks[T any] struct {
	timeout timingOut[T] // first: a zero-size last field would take a word of padding
	handOff handingOff[T]
	idem    *idemCall[T] // nil: not idempotent, not yet begun, or a replayed success (beginIdem)
	dl      deadLettering[T]
	obs     observing[T]
	guard   guarding[T]
}

// A panic in a hook or in fn runs the hooks' unwind and goes on, with its
// stack: each method below that calls out defers it, so that runCall has no
// defer of its own (see engine.go).

// begin starts the call: it reads the clock if a feature needs it, counts
// the first attempt that the entry point made (its error is c.last), and
// lets the hooks begin. done says v and err are the call's result.
func (hs *hooks[T]) begin(c *call) (v T, err error, done bool) {
	if c.cfg.features == 0 { // inlined: a call without features has nothing to begin
		if c.last != nil {
			c.attempts, c.ran = 1, true
		}
		return v, c.last, false
	}
	return hs.startHooked(c)
}

func (hs *hooks[T]) startHooked(c *call) (v T, err error, done bool) {
	if c.cfg.readsStart() {
		c.start = c.cfg.clockReading()
	}
	if r := c.cfg.resume; r != nil { // never with a first attempt of the entry point's: not plainFirst
		c.attempts, c.wait.prev = r.attempts, r.wait
	}
	switch r := c.last.(type) {
	case refusedFirst:
		c.last = nil // no attempt was made
		return v, c.errorOf(OutcomeRefused, r.why, nil), true
	case pausedFirst:
		c.last = nil // none yet: the loop's first holds
	}
	switch {
	case c.last != nil:
		c.attempts, c.ran = 1, true
		hs.guard.permit = c.cfg.limit != nil // guardedFirst's, held for the loop to judge
		return v, c.last, false
	case c.cfg.features&featIdempotency == 0 || c.ctx.Err() != nil:
		return v, nil, false
	}
	returned := false
	defer hs.unwindUnless(c, nil, &returned)
	v, err, act := beginIdem[T](c, &hs.idem)
	returned = true
	return v, err, act == endCall
}

// oneAttempt makes the next attempt with the hooks, each in turn: done says
// (v, err) is the call's result (a success, or a refusal); else err is the
// failed attempt's error, and next the policy's word on it if the attempt
// asked for it already, under its unwind: a panic in WithRetryIf must not
// leave a breaker waiting, nor an idempotency key claimed. The hooks'
// before and after are called from here, not from methods of hooks: a
// parked observed call's stack keeps its frames (see the notes at the
// top).
func (hs *hooks[T]) oneAttempt(c *call, fn func(context.Context) (T, error)) (v T, err error, next decision, done bool) {
	var a attemptState
	returned := false
	defer hs.unwindUnless(c, &a, &returned)
	f := c.cfg.features
	c.attempts++
	if f&featPause != 0 && c.cfg.pause.Paused() {
		if err = hs.guard.hold(c); err != nil {
			returned = true
			return v, err, next, true
		}
	}
	act := runFn
	if hs.idem != nil {
		v, err, act = hs.idem.before(c, &a)
	}
	if act == runFn && f&featGuard != 0 {
		if v, err, act = hs.guard.before(c, &a); act == endCall {
			returned = true
			return v, err, next, true
		}
	}
	if f&featObserver != 0 {
		startAttempt(c, &a, c.wait.prev)
	}
	if c.ran = act == runFn; c.ran {
		ctx := c.ctx
		if hs.idem != nil {
			ctx = hs.idem.fnContext(c, &a, ctx)
		}
		if f&featHedge != 0 {
			ctx = startRound[T](c, &a, ctx) // the round's, which hedges join
		}
		if f&featAttemptTimeout != 0 {
			ctx = hs.timeout.fnContext(c, &a, ctx)
		}
		v, err = fn(ctx)
	}
	if f&featAttemptTimeout != 0 {
		v, err = hs.timeout.after(c, &a, v, err)
	}
	if f&featGuard != 0 {
		v, err = hs.guard.after(c, &a, v, err) // fn's own result
	}
	if f&featHedge != 0 && c.ran {
		v, err, next = hs.awaitRound(c, &a, v, err)
	}
	if hs.idem != nil {
		v, err = hs.idem.after(c, &a, v, err)
		if _, cut := err.(*cutAttempt); cut {
			next = decision{} // a hedged attempt's decision did not know: the outcome is unknown
		}
	}
	if f&featDeadLetter != 0 {
		v, err = hs.dl.after(c, &a, v, err)
	}
	if f&featObserver != 0 && a.observed {
		endAttempt(c, &a, err, &hs.obs.lastEnd)
	}
	if err != nil && !next.made && f&(featBreaker|featLimit|featIdempotency) != 0 {
		next = hs.decideAttempt(c, err)
	}
	returned = true
	return v, err, next, err == nil
}

// ruleAttempt asks the policy what follows an attempt that failed with err, and
// tells the hooks, as the loop does: each error is classified once, for
// the wait and for a budget and a breaker alike.
func (hs *hooks[T]) decideAttempt(c *call, err error) decision {
	next := c.decideNext(c.attempts, c.wait.prev, err, c.cfg.maxAttempts)
	hs.decided(c, next)
	return next
}

// decided tells the hooks of the policy's decision on the last attempt.
func (hs *hooks[T]) decided(c *call, next decision) {
	if c.cfg.features&featGuard != 0 {
		hs.guard.decided(c, c.last, next)
	}
}

// retrying asks the hooks before a wait of d; an error refuses it.
func (hs *hooks[T]) retrying(c *call, d time.Duration) error {
	if !c.cfg.hooked() {
		return nil
	}
	return hs.retryingHooked(c, d)
}

func (hs *hooks[T]) retryingHooked(c *call, d time.Duration) (err error) {
	returned := false
	defer hs.unwindUnless(c, nil, &returned)
	if c.cfg.features&featGuard != 0 {
		err = hs.guard.retrying(c, d)
	}
	if err == nil && c.cfg.features&featHandOff != 0 {
		if err = hs.handOff.retrying(c, d); err != nil && c.cfg.features&featBudget != 0 {
			hs.guard.waited(c, d) // the budget's leave for a wait not made here
		}
	}
	if err == nil && c.cfg.features&featObserver != 0 {
		err = hs.obs.retrying(c, d)
	}
	returned = true
	return err
}

// waited tells the hooks that a wait of d ended, by its timer, by the
// call's context or by the process stopping; ended says err ends the call
// (its rest was handed off). The test inlines: a woken call without a
// budget, an observer or a hand-off touches no frame more.
func (hs *hooks[T]) waited(c *call, d time.Duration) (ended bool, err error) {
	if c.cfg.features&(featBudget|featObserver|featHandOff) != 0 {
		err = hs.waitedHooked(c, d)
	}
	return err != nil, err
}

// waitedHooked tells the hand-off, which hands off the rest of a wait
// that the process's stop cut short, then the budget, then the observer
// of a wait it announced (one of d > 0), that the wait ended.
func (hs *hooks[T]) waitedHooked(c *call, d time.Duration) (err error) {
	returned := false
	defer hs.unwindUnless(c, nil, &returned)
	if c.cfg.features&featHandOff != 0 {
		err = hs.handOff.waited(c, d)
	}
	if c.cfg.features&featBudget != 0 {
		hs.guard.waited(c, d)
	}
	if c.cfg.features&featObserver != 0 && d > 0 {
		hs.obs.waited(c, d)
	}
	returned = true
	return err
}

func (hs *hooks[T]) end(c *call, v T, err error) (T, error) {
	returned := false
	defer hs.unwindUnless(c, nil, &returned)
	var d Done
	// The dead letter first: a failure is made final in the store only
	// once its record exists, or a later replay would hold it alone.
	if c.cfg.features&featDeadLetter != 0 {
		v, err = hs.dl.end(c, v, err, &d)
	}
	if hs.idem != nil {
		v, err = hs.idem.end(c, v, err, &d)
	}
	if c.cfg.features&featObserver != 0 {
		v, err = hs.obs.end(c, v, err, &d)
	}
	returned = true
	return v, err
}

// unwindUnless runs the hooks' unwind unless the method that deferred it
// returned: a panic is under way. a is the attempt under way, or nil.
func (hs *hooks[T]) unwindUnless(c *call, a *attemptState, returned *bool) {
	if !*returned {
		hs.unwind(c, a)
	}
}

func (hs *hooks[T]) unwind(c *call, a *attemptState) {
	if c.cfg.features&featHedge != 0 {
		abandonRound[T](c) // first: no hedge runs on past the claim's end
	}
	if c.cfg.features&featHandOff != 0 {
		hs.handOff.unwind(c, a)
	}
	if hs.idem != nil {
		hs.idem.unwind(c, a)
	}
	if a != nil && c.cfg.features&featAttemptTimeout != 0 {
		hs.timeout.unwind(c, a)
	}
	if c.cfg.features&(featBreaker|featLimit) != 0 {
		hs.guard.unwind(c, a)
	}
	if a != nil && c.cfg.features&featObserver != 0 {
		hs.obs.unwind(c, a) // the call ends for the observer only in an attempt's panic
	}
}

// awaitRound decides the call's round once its first attempt, a, returned
// v and err, after the hooks of the attempt's own end (timeout, guard): a
// success of any attempt, a failure that ends the call, or the latest
// failure once all have failed; or the call's context ended. It returns
// the round's result, and the policy's word on it when it failed. The
// observer hears the end of the attempt whose result the round returns
// from the loop, after idempotency's part, as for a plain attempt; a is
// left describing that attempt.
func (hs *hooks[T]) awaitRound(c *call, a *attemptState, v T, err error) (T, error, decision) {
	var next decision
	r := c.hedges.(*hedgeRound[T])
	if !r.firstReturned() || err == nil && r.wonAlone() {
		return v, err, next // a round that sends no hedge, or whose timer was still armed
	}
	r.mu.Lock()
	lostFirst := r.closed
	r.firstIn = false
	switch {
	case r.closed:
		// A hedge won, or ended the call, while fn ran: fn's own result
		// is a loser's.
	case err == nil:
		r.closeLocked()
	default:
		c.attempts = r.next - 1
		r.failed = false // this failure is the latest now
		r.mu.Unlock()
		next = hs.decideAttempt(c, err)
		r.mu.Lock()
		if endsRound(next.verdict) {
			r.closeLocked()
		} else {
			r.hedgeNowLocked()
		}
	}
	if r.waitDecided(c.ctx) {
		next = decision{} // the loop finds the context ended
	}
	c.attempts = r.next - 1
	cancel, won, panicked := r.takeCancelsLocked(), r.won, r.panicked
	winner, failed, failure, dec := r.v, r.failed, r.err, r.dec
	r.mu.Unlock() // what follows calls out: no hook runs under the lock
	if cancel {
		r.cancelAttempts()
	}
	hs.firstEnded(c, a, v, err, lostFirst, panicked == nil && !won && (err == nil && !lostFirst || !failed))
	switch {
	case panicked != nil:
		panic(panicked)
	case won:
		v, err, next = winner, nil, decision{}
		a.number, a.start, a.observed = r.from, r.winStart, c.cfg.features&featObserver != 0
	case err == nil && !lostFirst: // fn's own success won
	case failed:
		v, err, next = *new(T), failure, dec
		a.number = r.from
		if !endsRound(dec.verdict) {
			// The hedge decided with its own number; the loop goes on
			// from the call's count. Its WithRetryIf has had its say.
			next = c.decideNext(c.attempts, c.wait.prev, retryWorthyError{failure}, c.cfg.maxAttempts)
		}
		c.last = err
	}
	return v, err, next
}

// firstEnded ends the round's first attempt, which returned v and err,
// for the hooks: unless its result is the round's (decides), the
// observer hears its end now (the loop tells the deciding one's), and if
// it lost, its success is dropped or its failure told as not counted.
func (hs *hooks[T]) firstEnded(c *call, a *attemptState, v T, err error, lost, decides bool) {
	if !decides && a.observed && c.cfg.features&featObserver != 0 {
		hs.obs.after(c, a, v, err)
	}
	if !lost {
		return
	}
	if err == nil {
		discard(v) // fn's success came after the round was decided
	} else if c.cfg.features&featGuard != 0 {
		hs.guard.tell(c, err, judgedNotCounted, false)
	}
}
