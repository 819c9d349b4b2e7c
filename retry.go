// Package retry calls a function again when it fails for a transient
// reason, and stops at once when it fails for good.
//
//	err := retry.Do(ctx, func(ctx context.Context) error {
//		return client.Send(ctx, msg)
//	}, retry.WithMaxAttempts(5))
//
// Between attempts Do waits as a [Backoff] says, randomized by a [Jitter]
// and capped by [WithMaxDelay] if given. An error marked [Permanent] stops
// at once; one marked [RetryAfter] sets the next wait, capped by
// [WithMaxDelay] or else [DefaultMaxDelay]. Do never sleeps past its
// context's deadline or its [WithMaxElapsed] budget: when the next wait
// would end at or after either, it returns at once. Whenever no attempt
// succeeds, errors.As finds an [*Error] in the returned error, and
// errors.Is matches both the reason for stopping and the last attempt's
// error; only bad input ([ErrInvalidOption]) is reported otherwise.
//
// Build a [Retrier] once with [New] and share it: it is immutable and safe
// for concurrent use, and its Do makes no allocation when the first attempt
// succeeds. The package-level [Do] and [DoValue] build one per call.
//
// For tests, [WithClock] takes a *clock.Mock from
// github.com/benbjohnson/clock and [WithWaitArmed] says when to advance it;
// see the mockClock example for the recipe.
package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/benbjohnson/clock"
)

// Retrier runs functions with a fixed retry policy. Build one with [New].
//
// The zero Retrier is ready to use and behaves as New() with no options.
// A Retrier is immutable and safe for concurrent use by multiple
// goroutines; every call keeps its own state (attempt count, previous
// wait, timer), so one Retrier may serve a whole program.
type Retrier struct {
	c config
}

// New returns a Retrier with the options applied in order. An invalid
// option gives an error that wraps [ErrInvalidOption] and names the
// problem; New never panics.
func New(opts ...Option) (*Retrier, error) {
	r := &Retrier{}
	if err := r.c.apply(opts); err != nil {
		return nil, err
	}
	return r, nil
}

func (c *config) apply(opts []Option) error {
	for i, o := range opts {
		if o == nil {
			c.fail("option %d is nil", i)
			continue
		}
		o(c)
	}
	c.checkIdem()
	c.checkDeadLetters()
	// Everything that needs the loop's state from the first attempt on
	// sends calls down the slow path.
	c.slow = c.observer != nil || c.attemptTimeout > 0 || c.maxElapsed > 0 || c.idem != nil || c.dl.active()
	return c.err
}

// With returns a new Retrier with r's options followed by opts, for
// per-call settings such as [WithName] or [WithPayload] on top of a shared
// policy. r is not changed.
func (r *Retrier) With(opts ...Option) (*Retrier, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: the *Retrier is nil; build one with New", ErrInvalidOption)
	}
	n := &Retrier{c: r.c}
	if err := n.c.apply(opts); err != nil {
		return nil, err
	}
	return n, nil
}

// Do calls fn until it succeeds or the policy says to stop, and returns
// nil only if some call of fn returned nil or, with [WithIdempotency], an
// earlier call's success was replayed. Otherwise errors.As finds an
// [*Error] in the returned error (it is the error itself unless a dead
// letter could not be recorded), except for bad input, which gives an
// error wrapping [ErrInvalidOption] and calls nothing; see the package
// documentation. Each call of fn gets ctx, or a context derived from it
// when [WithAttemptTimeout] is set. If ctx is already done, fn is not
// called.
//
// Do makes no allocation when the first attempt succeeds, starts no
// goroutine, and uses at most one timer per call, reused across waits.
// The one exception is [WithAttemptTimeout]'s per-attempt context: it comes
// from context.WithTimeout, or the injected clock's WithTimeout, which may
// start a goroutine that ends with the attempt (the standard library does
// for a parent context of a type of its own; clock.Mock always does).
func (r *Retrier) Do(ctx context.Context, fn func(context.Context) error) error {
	if r == nil || ctx == nil || fn == nil {
		return badCall(r == nil, ctx == nil)
	}
	if !r.c.slow && ctx.Err() == nil {
		// The fast path: nothing to observe, time or record, so the
		// first attempt needs none of the loop's state.
		if err := fn(ctx); err != nil {
			_, err = loop(ctx, &r.c, unit(fn), err, time.Time{})
			return err
		}
		return nil
	}
	_, err := run(ctx, &r.c, unit(fn))
	return err
}

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

// DoValueWith is [Retrier.Do] for a function that returns a value (a
// method cannot have type parameters). On success it returns the value of
// the call that succeeded, or the stored value replayed by
// [WithIdempotency]; otherwise the zero value and the error (see
// [WithIdempotencyCodec] for the one exception).
func DoValueWith[T any](ctx context.Context, r *Retrier, fn func(context.Context) (T, error)) (T, error) {
	if r == nil || ctx == nil || fn == nil {
		var zero T
		return zero, badCall(r == nil, ctx == nil)
	}
	if !r.c.slow && ctx.Err() == nil {
		v, err := fn(ctx)
		if err != nil {
			return loop(ctx, &r.c, fn, err, time.Time{})
		}
		return v, nil
	}
	return run(ctx, &r.c, fn)
}

// Do calls fn with a Retrier built from opts; see [Retrier.Do]. It costs
// one allocation per call for the options; on hot paths build a Retrier
// once with [New] instead.
func Do(ctx context.Context, fn func(context.Context) error, opts ...Option) error {
	var r Retrier
	if err := r.c.apply(opts); err != nil {
		return err
	}
	return r.Do(ctx, fn)
}

// DoValue calls fn with a Retrier built from opts and returns the value of
// the call that succeeded; see [Retrier.Do] and [DoValueWith].
func DoValue[T any](ctx context.Context, fn func(context.Context) (T, error), opts ...Option) (T, error) {
	var r Retrier
	if err := r.c.apply(opts); err != nil {
		var zero T
		return zero, err
	}
	return DoValueWith(ctx, &r, fn)
}

// run is the slow path: every call whose first attempt needs more than a
// plain call of fn.
func run[T any](ctx context.Context, cfg *config, fn func(context.Context) (T, error)) (T, error) {
	if cfg.idem != nil && cfg.idem.store != nil {
		return runIdempotent(ctx, cfg, fn)
	}
	return loop(ctx, cfg, fn, nil, time.Time{})
}

// call is the state of one call of Do. It lives on Do's stack.
type call struct {
	cfg      *config
	ctx      context.Context
	start    time.Time // set only when something needs elapsed time
	attempts int
	prevWait time.Duration
	last     error
	timer    waitTimer
	dead     *attemptLog // per-attempt errors for the dead letter; nil until a failure with a sink
}

// loop is the retry engine. If firstErr is not nil, the first attempt has
// already run (on the fast path of Do or DoValueWith) and failed with it.
// start is the call's start when the caller has read it already (an
// idempotent call's store work comes before the loop); when it is zero,
// loop reads the clock itself if anything needs elapsed time.
//
// The order of checks after a failed attempt is fixed: permanent, context,
// classification, attempts, time budget, context deadline; only then does
// Do wait.
func loop[T any](ctx context.Context, cfg *config, fn func(context.Context) (T, error), firstErr error, start time.Time) (T, error) {
	var zero T
	c := call{cfg: cfg, ctx: ctx, start: start}
	obs := cfg.observer
	deadLetters := cfg.dl.active()
	if start.IsZero() && cfg.needsStart() {
		c.start = cfg.now()
	}
	maxAttempts := cfg.maxAttempts
	if maxAttempts == 0 {
		maxAttempts = DefaultMaxAttempts
	}
	err := firstErr
	if err != nil {
		c.attempts = 1
	}
	for {
		if err == nil { // no failed attempt pending: run the next one
			if ctx.Err() != nil {
				// Right after a wait this still counts as ending in it,
				// so that observers keep an exact gauge of waits.
				return zero, c.stopForContext(c.attempts > 0 && c.prevWait > 0)
			}
			c.attempts++
			// mark is the clock at the attempt's start, then at its end.
			// The first attempt starts with the call, and a success ends
			// with its attempt: two clock reads in all on the path that
			// matters most.
			var mark time.Time
			if obs != nil {
				obs.OnAttemptStart(ctx, AttemptStart{Name: cfg.name, Attempt: c.attempts, Wait: c.prevWait})
				mark = c.start
				if c.attempts > 1 {
					mark = cfg.now()
				}
			}
			var v T
			v, err = attempt(ctx, cfg, fn)
			if obs != nil {
				end := cfg.now()
				obs.OnAttemptEnd(ctx, AttemptEnd{Name: cfg.name, Attempt: c.attempts, Err: err, Duration: end.Sub(mark)})
				mark = end
			}
			if err == nil {
				c.timer.stop()
				if obs != nil {
					obs.OnDone(ctx, Done{Name: cfg.name, Outcome: OutcomeSuccess, Attempts: c.attempts, Elapsed: mark.Sub(c.start)})
				}
				return v, nil
			}
		}
		c.last = err
		if deadLetters {
			c.logFailure(err)
		}

		hint, hinted := time.Duration(0), false
		switch {
		case IsPermanent(err):
			return zero, c.stop(OutcomePermanent, nil, nil, false)
		case ctx.Err() != nil:
			return zero, c.stopForContext(false)
		case errors.Is(err, context.Canceled):
			// Someone cancelled the work on purpose; another attempt
			// would be cancelled too.
			return zero, c.stop(OutcomePermanent, nil, nil, false)
		}
		if hint, hinted = retryAfterOf(err); !hinted && cfg.retryIf != nil && !cfg.retryIf(err) {
			return zero, c.stop(OutcomePermanent, nil, nil, false)
		}
		if c.attempts >= maxAttempts {
			return zero, c.stop(OutcomeExhausted, ErrExhausted, nil, false)
		}

		d := cfg.wait(c.attempts, c.prevWait, hint, hinted)
		if cfg.maxElapsed > 0 && d >= cfg.maxElapsed-cfg.now().Sub(c.start) {
			return zero, c.stop(OutcomeMaxElapsed, ErrMaxElapsed, nil, false)
		}
		if deadline, ok := ctx.Deadline(); ok && d >= cfg.until(deadline) {
			return zero, c.stopBeforeDeadline()
		}
		if obs != nil {
			obs.OnRetry(ctx, RetryScheduled{Name: cfg.name, Attempt: c.attempts, Delay: d, Err: err})
		}
		c.prevWait = d
		if !c.sleep(d) {
			return zero, c.stopForContext(true)
		}
		err = nil
	}
}

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

// stop ends a failed call: it releases the timer, builds the error, writes
// the dead letter and then tells the observer, so that Done says whether
// the dead letter was recorded.
func (c *call) stop(o Outcome, cause, ctxErr error, waited bool) error {
	return c.end(&Error{Outcome: o, Attempts: c.attempts, Last: c.last, Cause: cause, ctxErr: ctxErr}, waited)
}

// end finishes a failed call with e: it releases the timer, records the
// dead letter and tells the observer, in that order, so that Done says
// whether the dead letter was recorded.
func (c *call) end(e *Error, waited bool) error {
	c.timer.stop()
	var err error = e
	dl := DeadLetterNone
	if c.cfg.dl.active() && !notFailedWork(e.Last) {
		err, dl = c.deadLetter(e)
	}
	if obs := c.cfg.observer; obs != nil {
		obs.OnDone(c.ctx, Done{
			Name: c.cfg.name, Outcome: e.Outcome, Attempts: c.attempts,
			Elapsed: c.cfg.now().Sub(c.start), Waited: waited, DeadLetter: dl, Err: err,
		})
	}
	return err
}

// stopBeforeDeadline ends a call whose next wait would end past the
// context's deadline: it reports the deadline without waiting for it.
func (c *call) stopBeforeDeadline() error {
	return c.end(&Error{Outcome: OutcomeDeadline, Attempts: c.attempts, Last: c.last, Cause: context.DeadlineExceeded, early: true}, false)
}

// stopForContext ends a call whose context is done, keeping both the
// context's cause and its error (they differ with context.WithCancelCause).
func (c *call) stopForContext(waited bool) error {
	ctxErr := c.ctx.Err()
	cause := context.Cause(c.ctx)
	o := OutcomeCanceled
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		o = OutcomeDeadline
	}
	if cause == ctxErr {
		ctxErr = nil
	}
	return c.stop(o, cause, ctxErr, waited)
}

// sleep waits d on the call's timer and reports whether it ran to the end
// (false: the context was done first). A zero wait arms no timer, but
// still calls the WithWaitArmed hook, so that a test advancing a mock
// clock once per wait sees every wait of any schedule.
func (c *call) sleep(d time.Duration) bool {
	if d <= 0 {
		if c.cfg.waitArmed != nil {
			c.cfg.waitArmed(0)
		}
		return true
	}
	ch := c.timer.arm(c.cfg.clock, d)
	if c.cfg.waitArmed != nil {
		c.cfg.waitArmed(d)
	}
	select {
	case <-ch:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// waitTimer is the one timer of a call, made at the first non-zero wait and
// reset for the later ones. Without an injected clock it is a plain
// time.Timer, which saves the clock package's wrapper allocation.
type waitTimer struct {
	real *time.Timer
	mock *clock.Timer
}

func (w *waitTimer) arm(clk clock.Clock, d time.Duration) <-chan time.Time {
	if clk == nil {
		if w.real == nil {
			w.real = time.NewTimer(d)
		} else {
			w.real.Reset(d) // Go 1.23 timers: no stale value can be left in C
		}
		return w.real.C
	}
	if w.mock == nil {
		w.mock = clk.Timer(d)
	} else {
		w.mock.Reset(d)
	}
	return w.mock.C
}

func (w *waitTimer) stop() {
	if w.real != nil {
		w.real.Stop()
	}
	if w.mock != nil {
		w.mock.Stop()
	}
}

// needsStart says whether a call must read the clock when it starts: for
// observers, the time budget, or dead letters.
func (cfg *config) needsStart() bool {
	return cfg.observer != nil || cfg.maxElapsed > 0 || cfg.dl.active()
}

// epoch anchors the real clock's readings in now. It is set once, at
// start-up.
var epoch = time.Now()

// now reads the call's clock to measure time spans: the results are for
// Sub with each other and nothing else. On the real clock it reads only
// the monotonic clock, which costs half of time.Now (observed calls read
// it twice); the wall reading it carries is epoch's moved on by the
// monotonic time, so timestamps for people come from wallNow.
func (cfg *config) now() time.Time {
	if cfg.clock == nil {
		return epoch.Add(time.Since(epoch))
	}
	return cfg.clock.Now()
}

// wallNow is the call's clock for timestamps that people read.
func (cfg *config) wallNow() time.Time {
	if cfg.clock == nil {
		return time.Now()
	}
	return cfg.clock.Now()
}

// until is the time left before t, a deadline, on the call's clock.
func (cfg *config) until(t time.Time) time.Duration {
	if cfg.clock == nil {
		return time.Until(t) // monotonic when t has a monotonic reading
	}
	return t.Sub(cfg.clock.Now())
}

// wait computes the wait after attempt failed: jitter(backoff(attempt)),
// or hint for a server-supplied delay, capped by WithMaxDelay. Without
// one, DefaultMaxDelay caps hints only: the backoff is the caller's own
// choice, a hint is the server's.
func (cfg *config) wait(attempt int, prev, hint time.Duration, hinted bool) time.Duration {
	if hinted {
		if !cfg.maxDelaySet {
			return min(hint, DefaultMaxDelay)
		}
		return min(hint, cfg.maxDelay)
	}
	b := cfg.backoff
	if b == nil {
		b = exponential{initial: DefaultInitialDelay, multiplier: DefaultMultiplier, max: DefaultBackoffMax}
	}
	d := max(b.Delay(attempt, prev, cfg.random()), 0)
	j := cfg.jitter
	if !cfg.jitterSet {
		j = FullJitter
	}
	if _, random := b.(decorrelated); !random && j != NoJitter {
		d = j.Apply(d, cfg.random())
	}
	if cfg.maxDelaySet {
		d = min(d, cfg.maxDelay)
	}
	return d
}

func (cfg *config) random() float64 {
	if cfg.rand == nil {
		return rand.Float64()
	}
	return cfg.rand.float64()
}
