package retry

import (
	"context"
	"errors"
	"fmt"
)

// Retrier runs functions with a fixed retry policy; build one with [New].
// It is immutable and safe for concurrent use: every call keeps its own
// state, so one Retrier may serve a whole program. The zero Retrier acts
// as New() except that it has no retry budget ([WithBudget]), which it
// could share only with every other zero Retrier, as global state.
type Retrier struct {
	c config
}

// New returns a Retrier with the options applied in order. An invalid
// option gives an error that wraps [ErrInvalidOption] and names the
// problem; New never panics.
func New(opts ...Option) (*Retrier, error) {
	r := &Retrier{c: build(opts, true)}
	if r.c.err != nil {
		return nil, r.c.err
	}
	return r, nil
}

// With returns a new Retrier with r's options followed by opts, for
// per-call settings such as [WithName] or [WithPayload] on top of a shared
// policy. r is not changed.
func (r *Retrier) With(opts ...Option) (*Retrier, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: the *Retrier is nil; build one with New", ErrInvalidOption)
	}
	n := &Retrier{c: *r.config()}
	if err := n.c.apply(opts); err != nil {
		return nil, err
	}
	return n, nil
}

// Do calls fn until it succeeds or the policy says to stop. It returns nil
// only if a call of fn returned nil or [WithIdempotency] replayed a
// success; else an error holding an [*Error] (that error, unless a dead
// letter went unrecorded), or wrapping [ErrInvalidOption] for bad input,
// when nothing is called. fn gets ctx, or one derived from it by
// [WithAttemptTimeout] or WithIdempotency; if ctx is already done, fn is
// not called. The package doc's Cost section has its costs.
func (r *Retrier) Do(ctx context.Context, fn func(context.Context) error) error {
	if r == nil || ctx == nil || fn == nil {
		return badCall(r == nil, ctx == nil)
	}
	cfg := r.config()
	var first error
	if !cfg.slow {
		// The fast path: nothing to observe, time or record, so the
		// first attempt needs none of the loop's state. (Two ifs, not
		// one &&: the compiler then branches on Err's result at once.)
		if ctx.Err() == nil {
			if first = fn(ctx); first == nil {
				if cfg.budget != nil && !cfg.fullBucket() {
					cfg.succeeded()
				}
				return nil
			}
		}
	}
	// One adapter for both calls below: each would take a slot of its own
	// in this frame, which a parked call keeps on its stack.
	u := unit(fn)
	if cfg.idem == nil && !cfg.dl.active() {
		// No hooks (so never after the slow test above): run would only
		// add its frame to a parked call's stack.
		_, err := loop(ctx, cfg, u, first, nil)
		return err
	}
	_, err := run(ctx, cfg, u)
	return err
}

// fullBucket reports whether the budget is the library's token bucket and
// full, when a first-try success has nothing to tell it: the fast paths
// check it inline, and call succeeded only otherwise.
func (cfg *config) fullBucket() bool {
	b := cfg.bucket
	return b != nil && b.Full()
}

// succeeded tells the budget of a first attempt that succeeded.
func (cfg *config) succeeded() { cfg.budget.Attempted(1, false, false) }

// unit adapts fn to the value-returning form the loop runs.
func unit(fn func(context.Context) error) func(context.Context) (struct{}, error) {
	return func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) }
}

// badCall names what is missing from a call.
func badCall(nilRetrier, nilContext bool) error {
	switch {
	case nilRetrier:
		return fmt.Errorf("%w: the *Retrier is nil; build one with New", ErrInvalidOption)
	case nilContext:
		return fmt.Errorf("%w: the context is nil; use context.Background()", ErrInvalidOption)
	default:
		return fmt.Errorf("%w: fn is nil", ErrInvalidOption)
	}
}

// DoValueOn is [Retrier.Do] for a function that returns a value (a method
// cannot have type parameters). It returns the value of the call that
// succeeded, or the value [WithIdempotency] replayed; otherwise the zero
// value and the error, except when fn succeeded in an idempotent call whose
// outcome could not be recorded ([ErrOutcomeNotRecorded]) or whose value
// IdempotencyOptions.Marshal could not encode: then the value and the error.
func DoValueOn[T any](ctx context.Context, r *Retrier, fn func(context.Context) (T, error)) (T, error) {
	if r == nil || ctx == nil || fn == nil {
		var zero T
		return zero, badCall(r == nil, ctx == nil)
	}
	cfg := r.config()
	if !cfg.slow {
		if ctx.Err() == nil { // two ifs, as in Do
			v, err := fn(ctx)
			if err != nil {
				return loop(ctx, cfg, fn, err, nil)
			}
			if cfg.budget != nil && !cfg.fullBucket() {
				cfg.succeeded()
			}
			return v, nil
		}
	}
	if cfg.idem == nil && !cfg.dl.active() {
		return loop(ctx, cfg, fn, nil, nil)
	}
	return run(ctx, cfg, fn)
}

// Do calls fn with a Retrier built from opts; see [Retrier.Do].
func Do(ctx context.Context, fn func(context.Context) error, opts ...Option) error {
	var r *Retrier
	var first error
	if ctx != nil && fn != nil && quickOptions(opts) && ctx.Err() == nil {
		// The options are valid and the first attempt needs none of them.
		if first = fn(ctx); first == nil {
			return nil
		}
		// Build the policy now, on the heap, where the loop's calls
		// may keep it. It cannot fail: quickOptions checked opts.
		r = &Retrier{c: build(opts, false)}
	} else {
		var done bool
		if r, first, done = prepare(ctx, fn, opts); done {
			return first
		}
		if first == nil {
			return r.Do(ctx, fn)
		}
	}
	_, err := loop[struct{}](ctx, &r.c, unit(fn), first, nil)
	return err
}

// prepare is the package-level Do for options that the first attempt
// needs, or that quickOptions does not know: it applies opts and, if the
// first attempt needs none of them, makes it. done says the call is over
// (bad options, or a success), with first as its result; otherwise Do
// goes on with r, on the heap, and the first attempt's error if there was
// one. Kept out of line so that its config, 400 bytes of frame, is not on
// the stack of a call parked in a wait.
//
//go:noinline
func prepare(ctx context.Context, fn func(context.Context) error, opts []Option) (r *Retrier, first error, done bool) {
	c := build(opts, false)
	if c.err != nil {
		return nil, c.err, true
	}
	if !c.slow && ctx != nil && fn != nil && ctx.Err() == nil {
		if first = fn(ctx); first == nil {
			if c.budget != nil && !c.fullBucket() {
				c.succeeded()
			}
			return nil, nil, true
		}
	}
	return &Retrier{c: c}, first, false
}

// DoValue calls fn with a Retrier built from opts and returns the value of
// the call that succeeded; see [Retrier.Do] and [DoValueOn].
func DoValue[T any](ctx context.Context, fn func(context.Context) (T, error), opts ...Option) (T, error) {
	if ctx != nil && fn != nil && quickOptions(opts) && ctx.Err() == nil {
		// As in Do: the first attempt needs none of the options, and the
		// policy is built, on the heap, only if it fails.
		v, err := fn(ctx)
		if err == nil {
			return v, nil
		}
		r := &Retrier{c: build(opts, false)}
		return loop(ctx, &r.c, fn, err, nil)
	}
	r := &Retrier{c: build(opts, false)}
	if r.c.err != nil {
		var zero T
		return zero, r.c.err
	}
	return DoValueOn(ctx, r, fn)
}

// run is the slow path: every call whose first attempt needs more than a
// plain call of fn. It is where a call's features are put together: each
// configured one joins the call through a hook.
func run[T any](ctx context.Context, cfg *config, fn func(context.Context) (T, error)) (T, error) {
	var hs hooks[T]
	if cfg.idem != nil {
		h, err := newIdemCall[T](ctx, cfg)
		if err != nil {
			var zero T
			return zero, err
		}
		// A panic in fn must not leave the key claimed until the lease
		// runs out, nor one after fn succeeded free it (see abandon). No
		// recover: the panic keeps its stack.
		defer h.abandon()
		hs.idem = h
		fn = h.marked(fn)
	}
	if cfg.dl.active() {
		hs.dl = deadLetterHook[T]{cfg.dl}
	}
	return loop(ctx, cfg, fn, nil, &hs)
}

// loop is the retry engine. If firstErr is not nil, the first attempt has
// already run (on the fast path of Do or DoValueOn) and failed with it;
// hooks are the features of the call (see run). After a failed attempt
// the policy decides (config.decide) whether to wait or stop.
func loop[T any](ctx context.Context, cfg *config, fn func(context.Context) (T, error), firstErr error, hooks *hooks[T]) (T, error) {
	c := call{cfg: cfg, ctx: ctx}
	if cfg.needsStart() {
		c.start = cfg.now()
	}
	var v T
	err := firstErr
	if err != nil {
		c.attempts, c.ran = 1, true
		if cfg.budget != nil {
			c.settle(err, nil)
		}
	} else if ctx.Err() == nil {
		if v, err, done := hooks.begin(&c); done {
			return finish(&c, hooks, v, err)
		}
	}
	for {
		if err == nil { // no failed attempt pending: run the next one
			if ctx.Err() != nil {
				// Right after a wait this still counts as ending in it,
				// so that observers keep an exact gauge of waits.
				return finish(&c, hooks, v, c.stopForContext(c.attempts > 0 && c.prevWait > 0))
			}
			if hooks == nil && cfg.bareAttempts() {
				// The common call: nothing to ask, tell or time around
				// fn, so call it here (runAttempt's calls cost more).
				c.attempts++
				c.ran = true
				v, err = fn(ctx)
			} else if v, err = runAttempt(&c, hooks, fn); c.refused {
				var zero T
				return finish(&c, hooks, zero, err)
			}
			if err == nil {
				return finish(&c, hooks, v, nil)
			}
		}
		c.last = err
		d, verdict := c.next(c.attempts, c.prevWait, err, cfg.maxAttempts)
		if verdict != wait {
			var zero T
			return finish(&c, hooks, zero, c.stopFor(verdict))
		}
		// A wait after an attempt that did not call fn (another caller
		// holds the key) is a look at the store, not a retry of the
		// downstream: no budget or breaker is asked for it.
		if cfg.guarded && c.ran {
			if err = c.mayRetry(d); err != nil {
				var zero T
				return finish(&c, hooks, zero, err)
			}
		}
		if cfg.observer != nil {
			c.scheduled(d, c.last)
		}
		c.prevWait = d
		if ch := c.armWait(d); ch != nil {
			select {
			case <-ch:
			case <-ctx.Done():
				c.waitEnded(d)
				var zero T
				return finish(&c, hooks, zero, c.stopForContext(true))
			}
			c.waitEnded(d)
		}
		err = nil
	}
}

// bareAttempts says whether an attempt is only a call of fn when the call
// has no hooks: no observer, no per-attempt context, no budget or breaker
// to tell. A feature that adds work to every attempt outside the hooks
// adds its condition here.
func (cfg *config) bareAttempts() bool {
	return cfg.observer == nil && cfg.attemptTimeout <= 0 && cfg.budget == nil && cfg.breaker == nil
}

// runAttempt makes the next attempt: the hooks may answer it themselves
// (a replayed outcome, a key another caller holds) or look at fn's result.
func runAttempt[T any](c *call, hooks *hooks[T], fn func(context.Context) (T, error)) (T, error) {
	c.attempts++
	v, err, skip := hooks.before(c)
	c.ran = !skip
	var done func(error)
	if !skip && c.cfg.breaker != nil {
		var refused error
		if done, refused = c.cfg.breaker.Allow(); refused != nil {
			c.attempts-- // no attempt was made
			// Right after a wait the call still ends in it, for the
			// observers' gauge of waits.
			c.refused, c.waited = true, c.attempts > 0 && c.prevWait > 0
			var zero T
			return zero, c.fail(OutcomeRefused, refused, nil)
		}
	}
	c.attemptStarted()
	panicked := c.cfg.observer != nil // until the attempt ends: see endObserved
	if panicked {
		defer c.endObserved(&panicked)
	}
	switch {
	case skip:
	case done != nil:
		v, err = gatedAttempt(c, fn, done)
	default:
		v, err = attempt(c.ctx, c.cfg, fn)
		if c.cfg.budget != nil {
			c.settle(err, nil)
		}
	}
	// A panic in a hook after fn returned (an idempotent value's encoding)
	// is the attempt's too: the observer still hears it end.
	v, err = hooks.after(c, v, err)
	panicked = false
	c.attemptEnded(err)
	return v, err
}

// gatedAttempt is an attempt the breaker allowed: done hears how it ended,
// a panic in fn or in what judges its error (WithRetryIf) included, which
// counts as a failure (as in gobreaker's own Execute), so that a
// half-open breaker is not left waiting for it.
func gatedAttempt[T any](c *call, fn func(context.Context) (T, error), done func(error)) (v T, err error) {
	judged := false
	defer func() {
		if !judged {
			done(errPanicked)
		}
	}()
	v, err = attempt(c.ctx, c.cfg, fn)
	j, throttled := c.cfg.judge(c.ctx, err)
	judged = true
	c.tell(err, j, throttled, done)
	return v, err
}

// errPanicked is what a breaker and an observer hear of an attempt that
// panicked: its fn, or the WithRetryIf that judged its error.
var errPanicked = errors.New("retry: the attempt panicked")

// attempt calls fn once, with a per-attempt context if one is configured.
func attempt[T any](ctx context.Context, cfg *config, fn func(context.Context) (T, error)) (T, error) {
	if cfg.attemptTimeout <= 0 {
		return fn(ctx)
	}
	var cancel context.CancelFunc
	if cfg.clock == nil {
		ctx, cancel = context.WithTimeout(ctx, cfg.attemptTimeout)
	} else {
		ctx, cancel = cfg.clock.WithTimeout(ctx, cfg.attemptTimeout)
	}
	defer cancel()
	return fn(ctx)
}
