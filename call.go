package retry

import (
	"context"
	"errors"
	"time"

	"github.com/steadfast-go/retry/overload"
)

// call is the state of one call of Do. It lives on Do's stack; hooks get a
// pointer to it for the call's duration only.
type call struct {
	cfg   *config
	ctx   context.Context
	start time.Time // set only when something needs elapsed time
	// With an observer: the last attempt's start, then its end, as a span
	// since start (8 bytes where a time.Time takes 24: the frame of a
	// parked call is on its stack); marked says it is set.
	mark     time.Duration
	attempts int
	prevWait time.Duration
	last     error
	timer    waitTimer
	dead     *attemptLog // the dead-letter hook's per-attempt errors; nil until a failure
	// The flags last, together: no padding between them.
	ran      bool // the last attempt called fn (a hook did not answer it)
	marked   bool
	waited   bool // the call ended in (or right after) a non-zero wait
	dlStored bool // the dead-letter hook stored the call's record
	dlFailed bool // the dead-letter hook found every sink failing
	refused  bool // the breaker refused the next attempt: the error says why
	reached  bool // an attempt before called fn: tell has told the budget of the first
}

// settle tells the budget and the breaker how an attempt that called fn
// ended; done is the breaker's, if it allowed the attempt.
//
//go:noinline
func (c *call) settle(err error, done func(error)) {
	j, throttled := c.cfg.judge(c.ctx, err)
	c.tell(err, j, throttled, done)
}

// tell passes settle's judgement on: the breaker first, so that a budget
// that panics cannot leave a half-open breaker waiting.
func (c *call) tell(err error, j judgement, throttled bool, done func(error)) {
	if done != nil {
		switch j {
		case answered:
			done(nil)
		case notCounted:
			done(notCountedError{err})
		default:
			done(err)
		}
	}
	// Only a success refunds a budget, as gRFC A6 counts: a permanent
	// answer or an attempt that says nothing of the downstream is not told.
	// The call's first attempt to call fn is attempt 1 to the budget,
	// even after looks at a held key (FailWhileHeld), which spend
	// attempts but reach no downstream: a Ratio counts the call then.
	n := c.attempts
	if !c.reached {
		n, c.reached = 1, true
	}
	if b := c.cfg.budget; b != nil && (err == nil || j == failure) {
		b.Attempted(n, j == failure, throttled)
	}
}

// notCountedError is what a breaker hears of an attempt that says nothing
// of the downstream: it matches overload.ErrNotCounted and the attempt's
// error.
type notCountedError struct{ err error }

func (e notCountedError) Error() string {
	return overload.ErrNotCounted.Error() + ": " + errorText(e.err)
}
func (e notCountedError) Unwrap() []error { return []error{overload.ErrNotCounted, e.err} }

// mayRetry asks, before a wait of d, a breaker that can tell whether it
// would refuse the next attempt now, then the budget for leave to retry;
// it returns the call's error if either refuses.
//
//go:noinline
func (c *call) mayRetry(d time.Duration) error {
	if p, ok := c.cfg.breaker.(interface{ Refuses() error }); ok {
		if err := p.Refuses(); err != nil {
			return c.fail(OutcomeRefused, err, nil)
		}
	}
	if b := c.cfg.budget; b != nil {
		if err := b.Retry(d); err != nil {
			return c.fail(OutcomeRefused, err, nil)
		}
	}
	return nil
}

// waitEnded tells the budget that a wait it allowed is over. Out of
// line, like scheduled, to keep the loop's frame small.
//
//go:noinline
func (c *call) waitEnded(d time.Duration) {
	if d > 0 && c.cfg.budget != nil {
		c.cfg.budget.Waited()
	}
}

// attemptStarted tells the observer, and marks the attempt's start. The
// first attempt starts with the call, and a success ends with its
// attempt: two clock reads in all on the path that matters most.
func (c *call) attemptStarted() {
	obs := c.cfg.observer
	if obs == nil {
		return
	}
	obs.OnAttemptStart(c.ctx, AttemptStart{Name: c.cfg.name, Attempt: c.attempts, Wait: c.prevWait})
	c.mark, c.marked = 0, true
	if c.attempts > 1 {
		c.mark = c.cfg.now().Sub(c.start)
	}
}

// attemptEnded tells the observer how the attempt ended.
func (c *call) attemptEnded(err error) {
	obs := c.cfg.observer
	if obs == nil {
		return
	}
	end := c.cfg.now().Sub(c.start)
	obs.OnAttemptEnd(c.ctx, AttemptEnd{Name: c.cfg.name, Attempt: c.attempts, Err: err, Duration: end - c.mark})
	c.mark = end
}

// endObserved tells the observer, when fn or a hook after it panicked
// (*panicked is still true), that the attempt and the call ended, with errPanicked as their
// error and OutcomePermanent, so that its gauges of calls in flight come
// back to 0 (a server that recovers from a handler's panic goes on
// running); the panic goes on.
func (c *call) endObserved(panicked *bool) {
	if !*panicked {
		return
	}
	c.attemptEnded(errPanicked)
	c.cfg.observer.OnDone(c.ctx, Done{Name: c.cfg.name, Outcome: OutcomePermanent, Attempts: c.attempts,
		Elapsed: c.cfg.now().Sub(c.start), Err: errPanicked})
}

// finish ends the call with v and err (nil, or the call's *Error): it
// releases the timer, lets each hook have the last word, in order, and
// then tells the observer, so that Done sees what Do returns.
func finish[T any](c *call, hooks *hooks[T], v T, err error) (T, error) {
	c.timer.stop()
	v, err = hooks.end(c, v, err)
	if obs := c.cfg.observer; obs != nil {
		d := Done{Name: c.cfg.name, Attempts: c.attempts, Waited: c.waited,
			DeadLettered: c.dlStored, DeadLetterFailed: c.dlFailed, Err: err}
		switch e := asError(err); {
		case err == nil:
			// A success ends with its attempt's end, when there was one.
			if !c.marked {
				c.mark = c.cfg.now().Sub(c.start)
			}
			d.Elapsed = c.mark
		case e != nil:
			d.Outcome, d.Elapsed = e.Outcome, c.cfg.now().Sub(c.start)
		default:
			d.Outcome, d.Elapsed = OutcomePermanent, c.cfg.now().Sub(c.start)
		}
		obs.OnDone(c.ctx, d)
	}
	return v, err
}

// asError finds the call's *Error in err: err itself, or the error a hook
// wrapped it in (a dead letter not recorded). Unlike errors.As it does not
// make its target escape.
func asError(err error) *Error {
	for err != nil {
		switch e := err.(type) {
		case *Error:
			return e
		case *notRecordedError:
			return e.err
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

// fail builds the *Error of a call that stops with o.
func (c *call) fail(o Outcome, cause, ctxErr error) *Error {
	return &Error{Outcome: o, Attempts: c.attempts, Last: c.last, Cause: cause, ctxErr: ctxErr}
}

// stopFor builds the error of a call the policy stopped.
func (c *call) stopFor(v verdict) error {
	switch v {
	case stopContext:
		e := c.stopForContext(false)
		if c.ran {
			// fn was running when the context ended, or returned
			// past the deadline: it may have acted.
			e.Outcome = OutcomeUnknown
		}
		return e
	case stopExhausted:
		return c.fail(OutcomeExhausted, ErrExhausted, nil)
	case stopInner:
		// Another Retrier gave up on this error: end as it did (the
		// one classify found, not merely the first *Error in the chain).
		if in := innerGaveUp(c.last); in != nil {
			return c.fail(in.Outcome, in.Cause, nil)
		}
		// Only at the bound on the links looked at, where the two
		// walks may part.
		return c.fail(OutcomeExhausted, ErrExhausted, nil)
	case stopMaxElapsed:
		return c.fail(OutcomeMaxElapsed, ErrExhausted, nil)
	case stopUnknown:
		if e, ok := walk(c.last, isCutAttempt).(*cutAttempt); ok {
			return c.fail(OutcomeUnknown, e.cut, nil)
		}
	case stopDeadline:
		// The next wait would end past the deadline: report it without
		// waiting for it.
		e := c.fail(OutcomeDeadline, context.DeadlineExceeded, nil)
		e.early = true
		return e
	}
	return c.fail(OutcomePermanent, nil, nil)
}

// stopForContext builds the error of a call whose context is done, keeping
// both the context's cause and its error (they differ with
// context.WithCancelCause). waited says the call ended in a wait.
func (c *call) stopForContext(waited bool) *Error {
	c.waited = waited
	ctxErr := c.ctx.Err()
	cause := context.Cause(c.ctx)
	if ctxErr == nil {
		// The deadline passed before the context's timer said so (see
		// next): it ends the call as the deadline.
		ctxErr, cause = context.DeadlineExceeded, context.DeadlineExceeded
	}
	o := OutcomeCanceled
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		o = OutcomeDeadline
	}
	if cause == ctxErr {
		ctxErr = nil
	}
	return c.fail(o, cause, ctxErr)
}

func isCutAttempt(err error) bool { _, ok := err.(*cutAttempt); return ok }

// next asks the policy what follows a failed attempt. It reads the clock
// only for what the Retrier needs: the time budget, the context deadline.
// It asks the context for its deadline each time rather than keep it in
// the call, whose frame a parked call keeps on its stack.
func (c *call) next(attempt int, prev time.Duration, err error, maxAttempts int) (time.Duration, verdict) {
	var elapsed, left time.Duration
	if c.cfg.maxElapsed > 0 {
		elapsed = c.cfg.now().Sub(c.start)
	}
	deadline, hasDeadline := c.ctx.Deadline()
	if hasDeadline {
		left = c.cfg.until(deadline)
	}
	// A deadline already past ends the call as the context's end does,
	// even before the context's own timer has said so.
	return c.cfg.decide(attempt, maxAttempts, prev, err, c.ctx.Err() != nil || hasDeadline && left <= 0, elapsed, left, hasDeadline)
}

// scheduled tells the observer of a retry. It is kept out of line so that
// the event's struct does not widen the loop's frame, which a parked call
// keeps on its stack.
//
//go:noinline
func (c *call) scheduled(d time.Duration, err error) {
	c.cfg.observer.OnRetry(c.ctx, Scheduled{Name: c.cfg.name, Attempt: c.attempts, Delay: d, Err: err})
}

// needsStart says whether a call must read the clock when it starts: for
// observers, the time budget, or dead letters.
func (cfg *config) needsStart() bool {
	return cfg.observer != nil || cfg.maxElapsed > 0 || cfg.dl.active()
}
