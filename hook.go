package retry

import (
	"context"
	"time"
)

// hook is one feature's part in one call of Do: observing, guarding (a
// budget and a breaker), attemptTimeout, idemCall and deadLettering each
// implement it, and the loop (run) knows none of them by name. It calls
// them through hooks at fixed points. A hook keeps its per-call state in
// itself (each call has its own hooks) and its per-attempt state in the
// attempt, so that attempts may one day overlap (hedging). Hooks run on
// Do's goroutine, in order, never under a lock; noHook gives the methods
// a feature does not need.
type hook[T any] interface {
	// begin runs before the first attempt, while the context is live;
	// stop ends the call at once with v and err (a replayed outcome, or
	// an *Error for a call refused before any attempt).
	begin(c *call) (v T, err error, act action)
	// before runs before each attempt, c.attempts counting it. skip
	// makes v and err the attempt's result without calling fn (another
	// caller holds the key; its outcome was replayed); stop ends the call
	// with them (a breaker refused the attempt).
	before(c *call, a *attempt) (v T, err error, act action)
	// context returns the context fn gets, derived from ctx.
	context(c *call, a *attempt, ctx context.Context) context.Context
	// after runs when the attempt returned v and err, and returns the
	// attempt's result, which it may replace (a success whose outcome
	// could not be recorded).
	after(c *call, a *attempt, v T, err error) (T, error)
	// ruled runs when the policy ruled on the last attempt's error err: a
	// budget and a breaker hear of it.
	ruled(c *call, err error, next ruling)
	// retrying runs before a wait of d for another attempt; an error
	// refuses it and ends the call.
	retrying(c *call, d time.Duration) error
	// waited runs when a wait of d ended.
	waited(c *call, d time.Duration)
	// end runs once, when the call ends with v and err (nil, or an
	// *Error), fills in its part of the Done event and returns what Do
	// returns.
	end(c *call, v T, err error, d *Done) (T, error)
	// unwind runs when fn or a hook panicked; a is the attempt under way,
	// or nil.
	unwind(c *call, a *attempt)
}

// attempt is the hooks' state for one attempt: it lives in the frame of
// hooks.attempt while the attempt runs.
type attempt struct {
	cancel   context.CancelFunc // the attempt timeout's
	start    time.Duration      // the observer's mark of the attempt's start, since the call's
	observed bool               // the observer heard it start and not yet end
}

// action is what a hook's begin or before says of the attempt.
type action uint8

const (
	proceed action = iota // call fn
	skip                  // v and err are the attempt's result; fn is not called
	stop                  // v and err end the call
)

// noHook is the part of the seam a feature leaves alone; features embed it.
type noHook[T any] struct{}

func (noHook[T]) begin(*call) (v T, err error, act action) { return v, nil, proceed }
func (noHook[T]) before(*call, *attempt) (v T, err error, act action) {
	return v, nil, proceed
}
func (noHook[T]) context(_ *call, _ *attempt, ctx context.Context) context.Context { return ctx }
func (noHook[T]) after(_ *call, _ *attempt, v T, err error) (T, error)             { return v, err }
func (noHook[T]) ruled(*call, error, ruling)                                       {}
func (noHook[T]) retrying(*call, time.Duration) error                              { return nil }
func (noHook[T]) waited(*call, time.Duration)                                      {}
func (noHook[T]) end(_ *call, v T, err error, _ *Done) (T, error)                  { return v, err }
func (noHook[T]) unwind(*call, *attempt)                                           {}

// The features implement the seam.
var (
	_ hook[struct{}] = (*observing[struct{}])(nil)
	_ hook[struct{}] = (*guarding[struct{}])(nil)
	_ hook[struct{}] = attemptTimeout[struct{}]{}
	_ hook[struct{}] = (*idemCall[struct{}])(nil)
	_ hook[struct{}] = (*deadLettering[struct{}])(nil)
)

// hooks are the features of one call, in the order they run; the call's
// config.features says which are on, and with none the loop calls nothing
// here. The loop reaches them through these concrete fields rather than a
// []hook[T]: a *call passed to an interface method escapes to the heap,
// and Do must not allocate. A new feature implements hook[T], takes a
// field and a bit, and a line in each method below that it needs.
type hooks[T any] struct {
	idem    *idemCall[T] // nil: not idempotent, or not yet claimed
	dl      deadLettering[T]
	obs     observing[T]
	guard   guarding[T]
	timeout attemptTimeout[T]
}

// A panic in a hook or in fn runs the hooks' unwind and goes on, with its
// stack: each method below that calls out defers it, so that run has no
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
	return hs.start(c)
}

func (hs *hooks[T]) start(c *call) (v T, err error, done bool) {
	if c.cfg.readsStart() {
		c.start = c.cfg.reading()
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
	return v, err, act == stop
}

// attempt makes the next attempt with the hooks, each in turn: done says
// (v, err) is the call's result (a success, or a refusal); else err is the
// failed attempt's error, and next the policy's word on it if the attempt
// asked for it already (a breaker waits to hear it, and a panic in
// WithRetryIf must not leave it waiting). The hooks' before and after are
// called from here, not from methods of hooks: a parked observed call's
// stack keeps its frames (see engine.go).
func (hs *hooks[T]) attempt(c *call, fn func(context.Context) (T, error)) (v T, err error, next ruling, done bool) {
	var a attempt
	returned := false
	defer hs.unwindUnless(c, &a, &returned)
	f := c.cfg.features
	c.attempts++
	act := proceed
	if hs.idem != nil {
		v, err, act = hs.idem.before(c, &a)
	}
	if act == proceed && f&(featBudget|featBreaker) != 0 {
		if v, err, act = hs.guard.before(c, &a); act == stop {
			returned = true
			return v, err, next, true
		}
	}
	if f&featObserver != 0 {
		hs.obs.before(c, &a)
	}
	if c.ran = act == proceed; c.ran {
		ctx := c.ctx
		if f&featAttemptTimeout != 0 {
			ctx = hs.timeout.context(c, &a, ctx)
		}
		if hs.idem != nil {
			ctx = hs.idem.context(c, &a, ctx)
		}
		v, err = fn(ctx)
	}
	if f&featAttemptTimeout != 0 {
		v, err = hs.timeout.after(c, &a, v, err)
	}
	if f&(featBudget|featBreaker) != 0 {
		v, err = hs.guard.after(c, &a, v, err) // fn's own result
	}
	if hs.idem != nil {
		v, err = hs.idem.after(c, &a, v, err)
	}
	if f&featDeadLetter != 0 {
		v, err = hs.dl.after(c, &a, v, err)
	}
	if f&featObserver != 0 {
		v, err = hs.obs.after(c, &a, v, err)
	}
	if err != nil && f&featBreaker != 0 {
		next = hs.rule(c, err)
	}
	returned = true
	return v, err, next, err == nil
}

// rule asks the policy what follows an attempt that failed with err, and
// tells the hooks, as the loop does: each error is classified once, for
// the wait and for a budget and a breaker alike.
func (hs *hooks[T]) rule(c *call, err error) ruling {
	next := c.next(c.attempts, c.prevWait, err, c.cfg.maxAttempts)
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
	if err == nil && c.cfg.features&featObserver != 0 {
		err = hs.obs.retrying(c, d)
	}
	returned = true
	return err
}

// waited tells the hooks that a wait of d ended.
func (hs *hooks[T]) waited(c *call, d time.Duration) {
	if c.cfg.features&featBudget != 0 {
		returned := false
		defer hs.unwindUnless(c, nil, &returned)
		hs.guard.waited(c, d)
		returned = true
	}
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
func (hs *hooks[T]) unwindUnless(c *call, a *attempt, returned *bool) {
	if !*returned {
		hs.unwind(c, a)
	}
}

func (hs *hooks[T]) unwind(c *call, a *attempt) {
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
