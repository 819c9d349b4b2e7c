package retry

import (
	"context"
	"fmt"
)

// Retrier runs functions with a fixed retry policy; build one with [New].
// It is immutable and safe for concurrent use: every call keeps its own
// state, so one Retrier may serve a whole program. The zero Retrier acts
// as New() except that it has no retry budget ([WithOverload]), which it
// could share only with every other zero Retrier, as global state. A nil
// *Retrier is the zero Retrier, wherever one is taken.
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

// config returns the Retrier's settings: zeroConfig for the zero Retrier
// (or a nil one), whose attempts New would have set.
func (r *Retrier) config() *config {
	if r == nil || r.c.maxAttempts == 0 {
		return &zeroConfig
	}
	return &r.c
}

// With returns a new Retrier with r's options followed by opts, for
// per-call settings such as [WithName] or [WithPayload] on top of a shared
// policy. r is not changed.
func (r *Retrier) With(opts ...Option) (*Retrier, error) {
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
	if ctx == nil || fn == nil {
		return badCall(ctx == nil)
	}
	cfg := r.config()
	var c call
	c.cfg, c.ctx = cfg, ctx
	if cfg.plainFirst() {
		if ctx.Err() == nil { // two ifs: see engine.go
			// c.cfg, not cfg, from here: cfg kept across a call would
			// take the frame's room for the striped add's stack address.
			if c.cfg.features&featAdmit == 0 {
				c.last = fn(ctx)
			} else {
				c.last = guardedFirst(&c, fn) // two words of arguments: see guardedFirst
			}
			if c.last == nil {
				if r := c.cfg.ratio; r != nil { // inline, as firstSucceeded cannot be
					r.Attempted(1, false, false)
				} else if c.cfg.budget != nil && !c.cfg.fullBucket() {
					c.cfg.succeeded()
				}
				return nil
			}
		}
	}
	_, err := runCall(&c, unitFn(fn))
	return err
}

// badCall names what is missing from a call.
func badCall(nilContext bool) error {
	switch {
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
	if ctx == nil || fn == nil {
		var zero T
		return zero, badCall(ctx == nil)
	}
	cfg := r.config()
	var first error
	if cfg.plainFirst() {
		if ctx.Err() == nil { // two ifs: see engine.go
			var v T
			var err error
			if cfg.features&featAdmit == 0 {
				v, err = fn(ctx)
			} else {
				v, err = guardedFirstValue(&call{cfg: cfg, ctx: ctx}, fn)
			}
			if err == nil {
				if r := cfg.ratio; r != nil { // inline, as firstSucceeded cannot be
					r.Attempted(1, false, false)
				} else if cfg.budget != nil && !cfg.fullBucket() {
					cfg.succeeded()
				}
				return v, nil
			}
			first = err
		}
	}
	var c call
	c.cfg, c.ctx, c.last = cfg, ctx, first
	return runCall(&c, fn)
}

// Hedge is [Retrier.Do] with hedged attempts, as [WithHedge] set them on
// r: only for work that is safe to run twice at once. fn may run on
// other goroutines than the caller's, several at a time; it must return
// when its context ends. Do and DoValue never hedge, so that their fn
// stays on the caller's stack. A Retrier without WithHedge gives an error
// that wraps [ErrInvalidOption].
func (r *Retrier) Hedge(ctx context.Context, fn func(context.Context) error) error {
	if ctx == nil || fn == nil {
		return badCall(ctx == nil)
	}
	hc, err := startHedgedCall[struct{}](r.config().hedged, ctx, fn)
	if err != nil {
		return err
	}
	_, err = runCall(&hc.c, unitFn(fn)) // a panic ends the round in the hooks' unwind
	endHedgedCall(hc)
	return err
}

// HedgeValue is [Retrier.Hedge] for a function that returns a value: the
// value of the attempt that won, or the one [WithIdempotency] replayed.
// The losers' values are dropped, and closed if they are io.Closers.
func HedgeValue[T any](ctx context.Context, r *Retrier, fn func(context.Context) (T, error)) (T, error) {
	if ctx == nil || fn == nil {
		var zero T
		return zero, badCall(ctx == nil)
	}
	hc, err := startHedgedCall[T](r.config().hedged, ctx, fn)
	if err != nil {
		return *new(T), err
	}
	v, err := runCall(&hc.c, fn)
	endHedgedCall(hc)
	return v, err
}

// Hedges reports whether r hedges the calls of Hedge and HedgeValue
// (WithHedge); a package that wraps calls, such as retryhttp, asks it.
func (r *Retrier) Hedges() bool { return r.config().hedge != nil }

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
		r = built(opts)
	} else {
		var done bool
		if r, first, done = prepare(ctx, fn, opts); done {
			return first
		}
		if first == nil {
			return r.Do(ctx, fn)
		}
	}
	var c call
	c.cfg, c.ctx, c.last = &r.c, ctx, first
	_, err := runCall(&c, unitFn(fn))
	return err
}

// prepare is the package-level Do for options that the first attempt
// needs, or that quickOptions does not know: it applies opts and, if the
// first attempt needs none of them, makes it. done says the call is over
// (bad options, or a success), with first as its result; otherwise Do
// goes on with r, on the heap, and the first attempt's error if there was
// one. Out of line: see engine.go.
//
//go:noinline
func prepare(ctx context.Context, fn func(context.Context) error, opts []Option) (r *Retrier, first error, done bool) {
	c := build(opts, false)
	if c.err != nil {
		return nil, c.err, true
	}
	if c.plainFirst() && ctx != nil && fn != nil && ctx.Err() == nil {
		if c.features&featAdmit == 0 {
			first = fn(ctx)
		} else {
			// On the heap first: guardedFirst's call would move c there.
			r = &Retrier{c: c}
			first = guardedFirst(&call{cfg: &r.c, ctx: ctx}, fn)
		}
		if first == nil {
			c.firstSucceeded()
			return nil, nil, true
		}
	}
	if r == nil {
		r = &Retrier{c: c}
	}
	return r, first, false
}

// built is a Retrier of opts over the defaults, made on the heap. Out of
// line, as prepare is: see engine.go.
//
//go:noinline
func built(opts []Option) *Retrier { return &Retrier{c: build(opts, false)} }

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
		r := built(opts)
		var c call
		c.cfg, c.ctx, c.last = &r.c, ctx, err
		return runCall(&c, fn)
	}
	r := &Retrier{c: build(opts, false)}
	if r.c.err != nil {
		var zero T
		return zero, r.c.err
	}
	return DoValueOn(ctx, r, fn)
}
