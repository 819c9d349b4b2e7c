package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/steadfast-go/retry/internal/clocks"
)

// call is the loop's own state in one call of Do, which the hooks may
// read; they keep their own in hooks. The entry point makes it in its
// frame, and the loop and the hooks get a pointer for the call's
// duration.
type call struct {
	cfg      *config
	ctx      context.Context
	start    time.Duration // a reading of the clock, taken only when a feature needs elapsed time (config.readsStart)
	attempts int           // attempts made, the first included
	last     error         // the last attempt's error
	wait     callWait      // the wait before the last attempt, and the timer of the next
	ran      bool          // the last attempt called fn: no hook answered it
	// hedges is the round of a call of Hedge or HedgeValue (featHedge),
	// a *hedgeRound[T] that holds fn for the hedges to call on their
	// goroutines; nil for Do's, which does not hedge (so Do's fn need not
	// escape).
	hedges any
}

// callWait is a call's wait between attempts: how long the last one was
// (the policy's and the observers' prev), and the call's one timer.
type callWait struct {
	prev  time.Duration
	timer clocks.Timer
}

// sinceStart is the time since the call started, on its clock.
func (c *call) sinceStart() time.Duration { return c.cfg.clockReading() - c.start }

// sleepOrDone waits d on the call's timer and reports whether it ran to the end
// (false: the context was done first). A zero wait arms no timer, but
// still calls the clock's WaitArmed hook, so that a test advancing a mock
// clock once per wait sees every wait of any schedule.
func (c *call) sleepOrDone(d time.Duration) bool {
	ch := armWait(c.cfg, &c.wait.timer, d)
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// verdict is the policy's answer after a failed attempt.
type verdict uint8

const (
	waitAndRetry   verdict = iota // wait, then attempt again
	stopPermanent                 // the error is not worth another attempt
	stopContext                   // the call's context is done
	stopExhausted                 // that was the last attempt allowed
	stopMaxElapsed                // the wait would end at or after the time budget
	stopDeadline                  // the wait would end at or after the context's deadline
	stopInner                     // another Retrier gave up on the error already
	stopCanceled                  // the work was cancelled on purpose: ends as stopPermanent does
	stopUnknown                   // the idempotency claim's renewal cut the attempt off
)

// alwaysRetried is implemented by the errors of attempts that a hook
// refused for now, to be tried again whatever WithRetryIf says (another
// caller holds the idempotency key).
type alwaysRetried interface{ alwaysRetried() }

// decide says what follows a failed attempt: the wait before the next
// one, or why the call stops, and whether the server asked for the wait
// ([After]). It depends on nothing but its arguments and the Retrier's
// settings (and, for jitter, its random source), in the manner of
// x/time/rate's ReserveN(t): attempt is the number of the attempt that
// failed, prev the wait before it, elapsed the time since the call
// started (0 without a time budget), left the time to the context's
// deadline when hasDeadline, floor the least wait (a pause in force). The loop and an idempotent call waiting for
// another holder (which passes no attempt limit) ask it alike, and a
// budget and a breaker read its verdict (see judged): each error is
// classified once.
//
// The order of checks is fixed: permanent, context, classification,
// attempts, time budget, context deadline.
func (cfg *config) decide(attempt, maxAttempts int, prev time.Duration, err error, ctxDone bool, elapsed, left time.Duration, hasDeadline bool, floor time.Duration) (time.Duration, verdict, bool) {
	m := classify(err)
	if v := cfg.endsCall(m, ctxDone); v != waitAndRetry {
		return 0, v, false
	}
	if cfg.retryIf != nil && !m.hinted && cfg.retryIfRefuses(err) {
		return 0, stopPermanent, false
	}
	if attempt >= maxAttempts {
		return 0, stopExhausted, m.hinted
	}
	var d time.Duration
	if m.hinted || !cfg.zeroWaits {
		// Constant(0) waits 0 whatever the jitter and the cap: only a
		// server's delay needs computing.
		d = cfg.waitAfter(attempt, prev, m.hint, m.hinted, nil)
	}
	d = max(d, floor)
	switch {
	case cfg.maxElapsed > 0 && d >= cfg.maxElapsed-elapsed:
		return d, stopMaxElapsed, m.hinted
	case hasDeadline && d >= left:
		return d, stopDeadline, m.hinted
	}
	return d, waitAndRetry, m.hinted
}

// endsCall says whether an attempt's error, in whose chain classify found
// m, ends the call whatever the attempts and the time left, and why; wait
// means it does not, unless WithRetryIf refuses the error (asked by the
// caller, after this, since only that needs a call). It depends on m
// alone and inlines.
func (cfg *config) endsCall(m marks, ctxDone bool) verdict {
	switch {
	case m.cut:
		return stopUnknown
	case m.permanent:
		return stopPermanent
	case ctxDone:
		return stopContext
	case m.canceled:
		// Someone cancelled the work on purpose; another attempt would
		// be cancelled too.
		return stopCanceled
	case m.inner && !cfg.nestedRetries:
		return stopInner
	}
	return waitAndRetry
}

// retryIfRefuses asks WithRetryIf about err, unless a hook marked err to
// be tried again whatever it says. Its callers check first, inline, that
// WithRetryIf is set and err holds no server delay, which WithRetryIf is
// not asked about.
func (cfg *config) retryIfRefuses(err error) bool {
	if _, always := err.(alwaysRetried); always {
		return false
	}
	return !cfg.retryIf(err)
}

// judgement is what an attempt's end says of the downstream, for a budget
// and a breaker.
type judgement uint8

const (
	judgedAnswered   judgement = iota // a success, or an answer for good
	judgedNotCounted                  // the call's context, a cancellation, another Retrier's give-up
	judgedFailure                     // an error the policy would retry, attempts left or not
)

// judged says what a failed attempt on which decide decided v says of the
// downstream.
func judged(v verdict) judgement {
	switch v {
	case waitAndRetry, stopExhausted, stopMaxElapsed, stopDeadline:
		return judgedFailure
	case stopPermanent: // WithRetryIf's refusal included
		return judgedAnswered
	}
	return judgedNotCounted // the context, a cancellation, a cut attempt, another Retrier's give-up
}

// waitAfter computes the wait after attempt failed: jitter(backoff(attempt)),
// or hint for a server-supplied delay, each within its cap.
// rnd supplies the random samples; nil draws them from the Retrier's
// source (see random).
func (cfg *config) waitAfter(attempt int, prev, hint time.Duration, hinted bool, rnd func() float64) time.Duration {
	if hinted {
		// An explicit max delay caps every wait; without one only a
		// server's, since the backoff is the caller's own choice.
		if cfg.maxDelay > 0 {
			return min(hint, cfg.maxDelay)
		}
		return min(hint, defaultMaxServerDelay)
	}
	// Draw random samples only where they change the result: the
	// library's own schedules other than Decorrelated ignore theirs (a
	// user's own Backoff gets one), and jitter leaves a zero wait zero.
	b := cfg.backoff
	reads, jittered := true, true
	if s, own := b.(schedule); own {
		reads, jittered = s.sampling()
	}
	var u float64
	if reads {
		u = cfg.uniformSample(rnd)
	}
	d := max(b.Delay(attempt, prev, u), 0)
	if jittered && d > 0 && cfg.jitter.kind != noJitter {
		d = cfg.jitter.Apply(d, cfg.uniformSample(rnd))
	}
	if cfg.maxDelay > 0 {
		d = min(d, cfg.maxDelay)
	}
	return d
}

// sample is a uniform sample in [0, 1) from the Retrier's source.
func (cfg *config) sample() float64 { return cfg.uniformSample(nil) }

// uniformSample draws one uniform sample in [0, 1): from rnd if it is not nil
// ([Retrier.Wait]), else from the Retrier's source.
func (cfg *config) uniformSample(rnd func() float64) float64 {
	switch {
	case rnd != nil:
		return rnd()
	case cfg.rand != nil:
		return cfg.rand.uniform()
	}
	return rand.Float64()
}

// decideNext asks the policy what follows attempt, which failed with err after
// a wait of prev, with an attempt limit of maxAttempts (an idempotent call
// waiting for another holder has none), and keeps err as the call's last. It reads the clock only for what
// the Retrier needs (the time budget, the context's deadline) and asks the
// context for its deadline each time rather than keep it in the call.
func (c *call) decideNext(attempt int, prev time.Duration, err error, maxAttempts int) decision {
	c.last = err
	return c.decideFor(attempt, prev, err, maxAttempts)
}

// decideFor is decideNext without keeping err: a hedge, on its own goroutine,
// decides on its attempt while the loop's state is Do's.
func (c *call) decideFor(attempt int, prev time.Duration, err error, maxAttempts int) decision {
	var elapsed, left time.Duration
	if c.cfg.maxElapsed > 0 {
		elapsed = c.sinceStart()
	}
	deadline, hasDeadline := c.ctx.Deadline()
	if hasDeadline {
		left = c.cfg.clockUntil(deadline)
	}
	// A deadline already past ends the call as the context's end does,
	// even before the context's own timer has said so.
	d, v, hinted := c.cfg.decide(attempt, maxAttempts, prev, err, c.ctx.Err() != nil || hasDeadline && left <= 0, elapsed, left, hasDeadline, c.pauseFor(err))
	if v == stopDeadline && c.cfg.handOff.takes(d) {
		v = waitAndRetry // a call handed off returns at once: its deadline need not cover the wait
	}
	return decision{wait: d, verdict: v, hinted: hinted, made: true}
}

// pauseFor pauses the downstream for the server's delay that err, an
// attempt's error worth retrying, carries, and returns the least wait
// before the call's next attempt: the pause's rest, spread (0 while
// none is in force).
func (c *call) pauseFor(err error) time.Duration {
	p := c.cfg.pause
	if p == nil {
		return 0
	}
	if m := classify(err); m.hinted && c.cfg.endsCall(m, false) == waitAndRetry {
		p.Extend(c.ctx, m.hint)
	}
	return p.Hold(c.ctx, c.cfg.sample)
}

// decision is the policy's word on a failed attempt: wait, or stop for
// verdict; hinted says the server asked for the wait, made that the
// policy was asked.
type decision struct {
	wait    time.Duration
	verdict verdict
	hinted  bool
	made    bool
}

// errorOf builds the *Error of a call that stops with o.
func (c *call) errorOf(o Outcome, cause, ctxErr error) *Error {
	return &Error{Outcome: o, Attempts: c.attempts, Last: c.last, Cause: cause, ctxErr: ctxErr}
}

// stopFor builds the error of a call the policy stopped with v.
func (c *call) stopFor(v verdict) error {
	switch v {
	case stopContext:
		e := c.stopForContext()
		if c.ran {
			// fn was running when the context ended, or returned
			// past the deadline: it may have acted.
			e.Outcome = OutcomeUnknown
		}
		return e
	case stopExhausted:
		return c.errorOf(OutcomeExhausted, ErrExhausted, nil)
	case stopInner:
		// Another Retrier gave up on this error: end as it did (the
		// one classify found, not merely the first *Error in the chain).
		if in := innerGaveUp(c.last); in != nil {
			return c.errorOf(in.Outcome, in.Cause, nil)
		}
		// Only at the bound on the links looked at, where the two
		// walks may part.
		return c.errorOf(OutcomeExhausted, ErrExhausted, nil)
	case stopMaxElapsed:
		return c.errorOf(OutcomeMaxElapsed, ErrExhausted, nil)
	case stopUnknown:
		if e, ok := walk(c.last, isCutAttempt).(*cutAttempt); ok {
			return c.errorOf(OutcomeUnknown, e.cut, nil)
		}
	case stopDeadline:
		// The next wait would end past the deadline: report it without
		// waiting for it.
		e := c.errorOf(OutcomeDeadline, context.DeadlineExceeded, nil)
		e.early = true
		return e
	}
	return c.errorOf(OutcomePermanent, nil, nil)
}

// stopForContext builds the error of a call whose context is done, keeping
// both the context's cause and its error (they differ with
// context.WithCancelCause).
func (c *call) stopForContext() *Error {
	ctxErr := c.ctx.Err()
	cause := context.Cause(c.ctx)
	if ctxErr == nil {
		// The deadline passed before the context's timer said so (see
		// decideNext): it ends the call as the deadline.
		ctxErr, cause = context.DeadlineExceeded, context.DeadlineExceeded
	}
	o := OutcomeCanceled
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		o = OutcomeDeadline
	}
	if cause == ctxErr {
		ctxErr = nil
	}
	return c.errorOf(o, cause, ctxErr)
}

// plainAttempt makes an attempt of a call with no hooks: a call of fn.
func plainAttempt[T any](c *call, fn func(context.Context) (T, error)) (T, error, bool) {
	c.attempts++
	c.ran = true
	v, err := fn(c.ctx)
	return v, err, err == nil
}
