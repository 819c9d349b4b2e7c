package retry

import (
	"context"
	"time"
)

// What an error's chain holds: the walkers of the library, which look at
// no more than maxLinks links of it.

// IsPermanent reports whether err's chain holds a [Permanent] marker or an
// [*Error] with [OutcomePermanent]: a call that ended for good, also by a
// replay of [WithIdempotency], is permanent to an outer Do. It does not
// look inside an [*Error] (an inner Do's markers were its own), and like Do
// it looks at no more than 16,384 links, so a looping chain cannot hang it.
func IsPermanent(err error) bool {
	return classify(err).permanent
}

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

// cutAttempt is the error of an attempt that the claim's renewal cut off:
// its outcome is unknown, and the call ends with OutcomeUnknown and cut as
// its cause. It reads and unwraps as fn's own error.
type cutAttempt struct {
	err error // fn's
	cut error // the renewal's failure
}

func (e *cutAttempt) Error() string { return errorText(e.err) }
func (e *cutAttempt) Unwrap() error { return e.err }

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
