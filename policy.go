package retry

import (
	"context"
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
	found, left := walkN(err, isCanceledLink, left, true)
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
// one, or why the call stops. It depends on nothing but its arguments and
// the Retrier's settings (and, for jitter, its random source), in the
// manner of x/time/rate's ReserveN(t): attempt is the number of the
// attempt that failed, prev the wait before it, elapsed the time since the
// call started (0 without a time budget), left the time to the context's
// deadline when hasDeadline. The loop and any other waiting path (an
// idempotent call waiting for another holder, which passes no attempt
// limit) ask it alike.
//
// The order of checks is fixed: permanent, context, classification,
// attempts, time budget, context deadline.
func (cfg *config) decide(attempt, maxAttempts int, prev time.Duration, err error, ctxDone bool, elapsed, left time.Duration, hasDeadline bool) (time.Duration, verdict) {
	m := classify(err)
	if v := cfg.stops(m, ctxDone); v != wait {
		return 0, v
	}
	if cfg.retryIf != nil && !m.hinted && cfg.retryIfRefuses(err) {
		return 0, stopPermanent
	}
	if attempt >= maxAttempts {
		return 0, stopExhausted
	}
	var d time.Duration
	if m.hinted || !cfg.zeroWaits {
		// Constant(0) waits 0 whatever the jitter and the cap: only a
		// server's delay needs computing.
		d = cfg.wait(attempt, prev, m.hint, m.hinted, nil)
	}
	switch {
	case cfg.maxElapsed > 0 && d >= cfg.maxElapsed-elapsed:
		return d, stopMaxElapsed
	case hasDeadline && d >= left:
		return d, stopDeadline
	}
	return d, wait
}

// stops says whether an attempt's error, in whose chain classify found
// m, ends the call whatever the attempts and the time left, and why; wait
// means it does not, unless WithRetryIf refuses the error (asked by the
// callers, after this, since only that needs a call). decide and judge
// both read it, so that the loop and a budget or breaker agree on what an
// error is. It depends on m alone and inlines.
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

// judge says what an attempt that ended with err says of the downstream;
// throttled says the server asked for a delay.
func (cfg *config) judge(ctx context.Context, err error) (j judgement, throttled bool) {
	if err == nil {
		return answered, false
	}
	m := classify(err)
	switch cfg.stops(m, cfg.ctxDone(ctx)) {
	case wait:
		if cfg.retryIf != nil && !m.hinted && cfg.retryIfRefuses(err) {
			return answered, false
		}
		return failure, m.hinted
	case stopPermanent:
		return answered, false
	default: // the context, a cancellation, another Retrier's give-up
		return notCounted, false
	}
}

// ctxDone says whether the call's context has ended, as next reads it:
// done, or its deadline passed on the Retrier's clock before the
// context's own timer said so. judge reads it as next does, so that an
// attempt the loop ends as the context's end is not told as a failure.
func (cfg *config) ctxDone(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && cfg.until(deadline) <= 0
}

// wait computes the wait after attempt failed: jitter(backoff(attempt)),
// or hint for a server-supplied delay, each within its cap (see resolve).
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
