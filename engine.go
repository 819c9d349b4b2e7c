package retry

import (
	"context"
	"time"
)

// The engine: every call of Do, DoValue, Retrier.Do and DoValueOn runs in
// runCall, and every feature joins it as a hook (hook.go). The costs are the
// package doc's Cost section and BENCHMARKS.md; the allocation,
// parked-stack and goroutine tests are their specification. The craft
// that keeps them, one trick to a comment:
//
//   - A parked call keeps runCall's frame, and its caller's, on its stack
//     while it waits: with the runtime's select and timer frames under
//     them, a call stays within a goroutine's first 2 KB stack only while
//     they stay small. So the loop's state (call) and the hooks' per-call
//     state are a few words each, a time span takes 8 bytes where a
//     time.Time takes 24, and runCall selects on the timer itself;
//     everything else is out of line (hooks.oneAttempt, the policy, the
//     events), and runCall has no defer: the hooks' methods unwind a
//     panic themselves.
//   - The entry points make a first attempt that needs no hooks
//     themselves (config.plainFirst): a success then costs ctx.Err, the
//     call of fn and a budget's refund, inline (fullBucket), and builds
//     none of runCall's state. They test plainFirst and ctx.Err in two ifs,
//     not one &&: the compiler then branches on Err's result at once.
//   - With no hooks, an attempt is a call of fn in runCall itself, and
//     the hooks are never called: hooks.oneAttempt costs a frame and a
//     defer more.
//   - The package-level Do builds its config in prepare or built, kept
//     out of line (go:noinline) so that 400 bytes of config are not in
//     the frame of a call parked in a wait.

// runCall is the retry loop of the call c, which holds the Retrier's settings
// and the call's context: attempt, ask the policy, wait, until an attempt
// succeeds or the policy stops. The entry point builds c in its own
// frame, with the error of a first attempt it made itself in c.last.
func runCall[T any](c *call, fn func(context.Context) (T, error)) (T, error) {
	var hs hooks[T]
	v, err, done := hs.begin(c)
	for !done {
		var next ruling // the policy's word on the failed attempt
		switch {
		case err != nil: // the entry point's first attempt failed
		case c.ctx.Err() != nil:
			err, done = c.stopForContext(), true
			continue
		case c.cfg.hooked():
			v, err, next, done = hs.oneAttempt(c, fn)
		default:
			v, err, done = plainAttempt(c, fn)
		}
		if done {
			break
		}
		if !next.made {
			next = c.nextStep(c.attempts, c.prevWait, err, c.cfg.maxAttempts)
			hs.ruled(c, next)
		}
		if next.verdict != waitAndRetry {
			err = c.stopFor(next.verdict)
			break
		}
		if err = hs.retrying(c, next.wait); err != nil {
			break
		}
		c.prevWait, err = next.wait, nil
		if ch := armWait(c.cfg, &c.timer, next.wait); ch != nil {
			select {
			case <-ch:
			case <-c.ctx.Done(): // the next look at ctx ends the call, unless waited hands the rest off
			}
			done, err = hs.waited(c, next.wait)
		}
	}
	return finishCall(c, &hs, v, err)
}

// finishCall ends the call with v and err (nil, or the call's *Error): it
// releases the timer and lets each hook have the last word, in order. A
// failed call returns the zero value, unless a hook says otherwise.
func finishCall[T any](c *call, hs *hooks[T], v T, err error) (T, error) {
	c.timer.stop(c.cfg.clock)
	if err != nil {
		v = *new(T)
	}
	if c.cfg.hooked() {
		return hs.end(c, v, err)
	}
	return v, err
}

// fullBucket says whether the budget is the library's token bucket, full,
// when a first-try success has nothing to tell it: the entry points check
// it inline, and call succeeded only otherwise, so that such a success
// costs no call.
func (cfg *config) fullBucket() bool { b := cfg.bucket; return b != nil && b.Full() }

// succeeded tells the budget of a first attempt that succeeded on an entry
// point's fast path.
func (cfg *config) succeeded() { cfg.budget.Attempted(1, false, false) }

// unitFn adapts fn to the value-returning form the loop runs.
func unitFn(fn func(context.Context) error) func(context.Context) (struct{}, error) {
	return func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) }
}

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
	idem    *idemCall[T] // nil: not idempotent, or not yet claimed
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
		c.attempts, c.prevWait = r.attempts, r.wait
	}
	switch {
	case c.last != nil:
		c.attempts, c.ran = 1, true
		return v, c.last, false
	case c.cfg.features&featIdempotency == 0 || c.ctx.Err() != nil:
		return v, nil, false
	}
	h, err := newIdemCall[T](c.ctx, c.cfg)
	if err != nil {
		return v, err, true
	}
	hs.idem = h
	returned := false
	defer hs.unwindUnless(c, nil, &returned)
	v, err, act := h.begin(c)
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
func (hs *hooks[T]) oneAttempt(c *call, fn func(context.Context) (T, error)) (v T, err error, next ruling, done bool) {
	var a attemptState
	returned := false
	defer hs.unwindUnless(c, &a, &returned)
	f := c.cfg.features
	c.attempts++
	act := runFn
	if hs.idem != nil {
		v, err, act = hs.idem.before(c, &a)
	}
	if act == runFn && f&(featBudget|featBreaker) != 0 {
		if v, err, act = hs.guard.before(c, &a); act == endCall {
			returned = true
			return v, err, next, true
		}
	}
	if f&featObserver != 0 {
		hs.obs.before(c, &a)
	}
	if c.ran = act == runFn; c.ran {
		ctx := c.ctx
		if hs.idem != nil {
			ctx = hs.idem.fnContext(c, &a, ctx)
		}
		if f&featHedge != 0 {
			v, err, next = hs.hedging(c, &a, ctx, fn)
		} else {
			if f&featAttemptTimeout != 0 {
				ctx = hs.timeout.fnContext(c, &a, ctx)
			}
			v, err = fn(ctx)
		}
	}
	if f&featAttemptTimeout != 0 {
		v, err = hs.timeout.after(c, &a, v, err)
	}
	if f&(featBudget|featBreaker) != 0 {
		v, err = hs.guard.after(c, &a, v, err) // fn's own result
	}
	if hs.idem != nil {
		v, err = hs.idem.after(c, &a, v, err)
		if _, cut := err.(*cutAttempt); cut {
			next = ruling{} // a hedged attempt's ruling did not know: the outcome is unknown
		}
	}
	if f&featDeadLetter != 0 {
		v, err = hs.dl.after(c, &a, v, err)
	}
	if f&featObserver != 0 && a.observed {
		v, err = hs.obs.after(c, &a, v, err)
	}
	if err != nil && !next.made && f&(featBreaker|featIdempotency) != 0 {
		next = hs.ruleAttempt(c, err)
	}
	returned = true
	return v, err, next, err == nil
}

// ruleAttempt asks the policy what follows an attempt that failed with err, and
// tells the hooks, as the loop does: each error is classified once, for
// the wait and for a budget and a breaker alike.
func (hs *hooks[T]) ruleAttempt(c *call, err error) ruling {
	next := c.nextStep(c.attempts, c.prevWait, err, c.cfg.maxAttempts)
	hs.ruled(c, next)
	return next
}

// ruled tells the hooks of the policy's word on the last attempt.
func (hs *hooks[T]) ruled(c *call, next ruling) {
	if c.cfg.features&(featBudget|featBreaker) != 0 {
		hs.guard.ruled(c, c.last, next)
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
	if c.cfg.features&(featBudget|featBreaker) != 0 {
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
	if hs.idem != nil {
		v, err = hs.idem.end(c, v, err, &d)
	}
	if c.cfg.features&featDeadLetter != 0 {
		v, err = hs.dl.end(c, v, err, &d)
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
	if c.cfg.features&featHandOff != 0 {
		hs.handOff.unwind(c, a)
	}
	if hs.idem != nil {
		hs.idem.unwind(c, a)
	}
	if a != nil && c.cfg.features&featAttemptTimeout != 0 {
		hs.timeout.unwind(c, a)
	}
	if c.cfg.features&featBreaker != 0 {
		hs.guard.unwind(c, a)
	}
	if a != nil && c.cfg.features&featObserver != 0 {
		hs.obs.unwind(c, a) // the call ends for the observer only in an attempt's panic
	}
}
