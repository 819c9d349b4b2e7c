package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// verdict is the policy's answer after a failed attempt.
type verdict uint8

const (
	wait           verdict = iota // wait, then attempt again
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

// marks is what one walk of an error's chain found for the policy.
type marks struct {
	permanent bool          // a Permanent marker, or an *Error that ended permanently
	inner     bool          // an *Error of a Retrier that gave up: exhausted, out of time, refused
	canceled  bool          // the chain matches context.Canceled (errors.Is)
	hinted    bool          // an After marker was found
	cut       bool          // a cutAttempt: the claim's renewal cut the attempt off
	hint      time.Duration // the first After marker's delay
}

// classify walks err's chain once for what the policy reads. Like
// IsPermanent it looks for markers only outside any *Error, whose own
// markers were an inner Do's to act on; context.Canceled is matched as
// errors.Is would, inside an *Error too. It looks at no more than
// maxLinks links.
func classify(err error) (m marks) {
	m.walk(err, maxLinks)
	return m
}

// maxLinks bounds how many links of an error's chain Do looks at, so that
// a chain that loops (an Unwrap that returns its own error, or a tree
// that holds itself) cannot hang a call or overflow its stack; the links
// past it are not looked at. No real chain comes near it.
const maxLinks = 1 << 14

// walk adds what err's chain holds to m, looking at no more than left
// links, and returns how many it may still look at.
func (m *marks) walk(err error, left int) int {
	if left <= 0 { // a child of a tree: checked before it is looked at
		return 0
	}
	for err != nil {
		// One type switch per link: a plain error (errors.New) goes
		// through it to default, with no further type assertion, and
		// returns; only a link that wraps another counts against left.
		switch e := err.(type) {
		case *permanentError:
			m.permanent = true
			err = e.err
		case *retryAfterError:
			if !m.hinted {
				m.hint, m.hinted = e.delay, true
			}
			err = e.err
		case *cutAttempt:
			m.cut = true
			err = e.err
		case *Error:
			m.permanent = m.permanent || e.Outcome == OutcomePermanent
			m.inner = m.inner || e.gaveUp()
			if !m.canceled {
				m.canceled, left = canceledIn(e, left)
			}
			return left
		case interface{ Unwrap() error }:
			m.canceled = m.canceled || isCanceled(err)
			err = e.Unwrap()
		case interface{ Unwrap() []error }:
			m.canceled = m.canceled || isCanceled(err)
			for _, inner := range e.Unwrap() {
				if left = m.walk(inner, left-1); left <= 0 {
					return 0
				}
			}
			return left
		case interface{ Is(error) bool }:
			m.canceled = m.canceled || e.Is(context.Canceled)
			return left
		default:
			m.canceled = m.canceled || err == context.Canceled
			return left
		}
		if left--; left <= 0 {
			return 0
		}
	}
	return left
}

// canceledIn is errors.Is(err, context.Canceled), looking at no more than
// left links; it also returns how many it may still look at.
func canceledIn(err error, left int) (bool, int) {
	found, left := walkN(err, isCanceledLink, left, intoErrors)
	return found != nil, left
}

// isCanceledLink says whether one link of a chain is context.Canceled to
// errors.Is.
func isCanceledLink(err error) bool { return err == context.Canceled || isCanceled(err) }

// innerGaveUp returns the *Error for which classify marked err inner: the
// first, in the same order, of a Retrier that gave up (exhausted, out of
// time, refused); nil if there is none within maxLinks links.
func innerGaveUp(err error) *Error {
	e, _ := walk(err, func(err error) bool {
		e, ok := err.(*Error)
		return ok && e.gaveUp()
	}).(*Error)
	return e
}

// gaveUp says whether e is the error of a Retrier that gave up on an error
// worth retrying: it ran out of attempts or of time, was refused, or does
// not know whether its work happened (another attempt of it is the inner
// Retrier's to decide).
func (e *Error) gaveUp() bool {
	return e.Outcome == OutcomeExhausted || e.Outcome == OutcomeMaxElapsed || e.Outcome == OutcomeRefused || e.Outcome == OutcomeUnknown
}

// isCanceled says whether a wrapper, not its chain, is context.Canceled
// to errors.Is: only through an Is method of its own, since
// context.Canceled itself wraps nothing.
func isCanceled(wrapper error) bool {
	is, ok := wrapper.(interface{ Is(error) bool })
	return ok && is.Is(context.Canceled)
}

// decide says what follows a failed attempt: the wait before the next
// one, or why the call stops, and whether the server asked for the wait
// ([After]). It depends on nothing but its arguments and the Retrier's
// settings (and, for jitter, its random source), in the manner of
// x/time/rate's ReserveN(t): attempt is the number of the attempt that
// failed, prev the wait before it, elapsed the time since the call
// started (0 without a time budget), left the time to the context's
// deadline when hasDeadline. The loop and an idempotent call waiting for
// another holder (which passes no attempt limit) ask it alike, and a
// budget and a breaker read its verdict (see judged): each error is
// classified once.
//
// The order of checks is fixed: permanent, context, classification,
// attempts, time budget, context deadline.
func (cfg *config) decide(attempt, maxAttempts int, prev time.Duration, err error, ctxDone bool, elapsed, left time.Duration, hasDeadline bool) (time.Duration, verdict, bool) {
	m := classify(err)
	if v := cfg.stops(m, ctxDone); v != wait {
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
		d = cfg.wait(attempt, prev, m.hint, m.hinted, nil)
	}
	switch {
	case cfg.maxElapsed > 0 && d >= cfg.maxElapsed-elapsed:
		return d, stopMaxElapsed, m.hinted
	case hasDeadline && d >= left:
		return d, stopDeadline, m.hinted
	}
	return d, wait, m.hinted
}

// stops says whether an attempt's error, in whose chain classify found
// m, ends the call whatever the attempts and the time left, and why; wait
// means it does not, unless WithRetryIf refuses the error (asked by the
// caller, after this, since only that needs a call). It depends on m
// alone and inlines.
func (cfg *config) stops(m marks, ctxDone bool) verdict {
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
	return wait
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
	answered   judgement = iota // a success, or an answer for good
	notCounted                  // the call's context, a cancellation, another Retrier's give-up
	failure                     // an error the policy would retry, attempts left or not
)

// judged says what a failed attempt on which decide ruled v says of the
// downstream.
func judged(v verdict) judgement {
	switch v {
	case wait, stopExhausted, stopMaxElapsed, stopDeadline:
		return failure
	case stopPermanent: // WithRetryIf's refusal included
		return answered
	}
	return notCounted // the context, a cancellation, a cut attempt, another Retrier's give-up
}

// wait computes the wait after attempt failed: jitter(backoff(attempt)),
// or hint for a server-supplied delay, each within its cap.
// rnd supplies the random samples; nil draws them from the Retrier's
// source (see random).
func (cfg *config) wait(attempt int, prev, hint time.Duration, hinted bool, rnd func() float64) time.Duration {
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
		u = cfg.sample(rnd)
	}
	d := max(b.Delay(attempt, prev, u), 0)
	if jittered && d > 0 && cfg.jitter != NoJitter {
		d = cfg.jitter.Apply(d, cfg.sample(rnd))
	}
	if cfg.maxDelay > 0 {
		d = min(d, cfg.maxDelay)
	}
	return d
}

// sample draws one uniform sample in [0, 1): from rnd if it is not nil
// ([Retrier.Wait]), else from the Retrier's source.
func (cfg *config) sample(rnd func() float64) float64 {
	switch {
	case rnd != nil:
		return rnd()
	case cfg.rand != nil:
		return cfg.rand.float64()
	}
	return rand.Float64()
}

// next asks the policy what follows attempt, which failed with err after
// a wait of prev, with an attempt limit of maxAttempts (an idempotent call
// waiting for another holder has none), and keeps err as the call's last. It reads the clock only for what
// the Retrier needs (the time budget, the context's deadline) and asks the
// context for its deadline each time rather than keep it in the call.
func (c *call) next(attempt int, prev time.Duration, err error, maxAttempts int) ruling {
	c.last = err
	var elapsed, left time.Duration
	if c.cfg.maxElapsed > 0 {
		elapsed = c.elapsed()
	}
	deadline, hasDeadline := c.ctx.Deadline()
	if hasDeadline {
		left = c.cfg.until(deadline)
	}
	// A deadline already past ends the call as the context's end does,
	// even before the context's own timer has said so.
	d, v, hinted := c.cfg.decide(attempt, maxAttempts, prev, err, c.ctx.Err() != nil || hasDeadline && left <= 0, elapsed, left, hasDeadline)
	return ruling{wait: d, verdict: v, hinted: hinted, made: true}
}

// ruling is the policy's word on a failed attempt: wait, or stop for
// verdict; hinted says the server asked for the wait, made that the
// policy was asked.
type ruling struct {
	wait    time.Duration
	verdict verdict
	hinted  bool
	made    bool
}

// fail builds the *Error of a call that stops with o.
func (c *call) fail(o Outcome, cause, ctxErr error) *Error {
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
// context.WithCancelCause).
func (c *call) stopForContext() *Error {
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

// walk returns the first error in err's tree, depth first, for which match
// is true. Unlike errors.As it stops at an *Error, so that markers seen by an
// inner Do do not leak into an outer one; like classify it looks at no more
// than maxLinks links.
func walk(err error, match func(error) bool) error {
	found, _ := walkN(err, match, maxLinks, atErrors)
	return found
}

// walkThrough is walk going on into the last error of each inner Do's
// *Error it meets.
func walkThrough(err error, match func(error) bool) error {
	found, _ := walkN(err, match, maxLinks, intoLast)
	return found
}

// inner says what walkN does at an *Error: an inner Do's outcome.
type inner uint8

const (
	atErrors   inner = iota // stop: its markers were the inner Do's to act on
	intoErrors              // go on into its chain, as errors.Is does
	intoLast                // go on into its last attempt's error alone
)

// walkN is the library's walker of error chains, besides classify's own
// pass: walk looking at no more than left links, doing at an *Error what
// at says. It also returns how many links it may still look at.
func walkN(err error, match func(error) bool, left int, at inner) (error, int) {
	for ; err != nil; left-- {
		if left <= 0 {
			return nil, 0
		}
		if match(err) {
			return err, left
		}
		if e, ok := err.(*Error); ok && at != intoErrors {
			if at == atErrors {
				return nil, left
			}
			err = e.Last
			continue
		}
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				var found error
				if found, left = walkN(inner, match, left-1, at); found != nil || left <= 0 {
					return found, left
				}
			}
			return nil, left
		default:
			return nil, left
		}
	}
	return nil, left
}
