package retry

import (
	"errors"
	"time"

	"github.com/steadfast-go/retry/overload"
)

// guarding is the hook of WithBudget and WithBreaker: the breaker is asked
// before each attempt that calls fn and hears how it ended; the budget
// hears every such attempt, and is asked before each retry of one.
type guarding[T any] struct {
	noHook[T]
	done    func(error) // the breaker's, for the last attempt, until it has heard of it
	told    bool        // the budget and the breaker heard of the last attempt
	reached bool        // an attempt called fn: the first such is attempt 1 to the budget
	asked   bool        // the budget allowed the wait under way (Retry): Waited gives it back
}

func (g *guarding[T]) before(c *call, _ *attemptState) (v T, err error, act action) {
	g.told = false
	br := c.cfg.breaker
	if br == nil {
		return v, nil, runFn
	}
	done, why := br.Allow()
	if why != nil {
		c.attempts-- // no attempt was made
		return v, c.errorOf(OutcomeRefused, why, nil), endCall
	}
	g.done = done
	return v, nil, runFn
}

// after tells of a success at once, before any hook after it can panic:
// the downstream answered. A failure is told once the policy has ruled on
// it (see ruled).
func (g *guarding[T]) after(c *call, _ *attemptState, v T, err error) (T, error) {
	if err == nil && c.ran {
		g.tell(c, nil, judgedAnswered, false)
	}
	return v, err
}

// ruled tells of a failed attempt on which the policy ruled.
func (g *guarding[T]) ruled(c *call, err error, next ruling) {
	if c.ran {
		g.tell(c, err, judged(next.verdict), next.hinted)
	}
}

// tell passes an attempt's judgement on, once: the breaker first, so that
// a budget that panics cannot leave a half-open breaker waiting.
func (g *guarding[T]) tell(c *call, err error, j judgement, throttled bool) {
	if g.told {
		return
	}
	g.told = true
	n := c.attempts
	if !g.reached {
		// The call's first attempt to call fn is attempt 1 to the
		// budget, even after looks at a held key (FailWhileHeld), which
		// spend attempts but reach no downstream: a Ratio counts the
		// call then.
		n, g.reached = 1, true
	}
	done := g.done
	g.done = nil
	tellGuard(c.cfg, done, n, err, j, throttled)
}

// tellGuard tells a breaker's done, then the budget, how attempt n ended:
// the breaker first, so that a budget that panics cannot leave a
// half-open breaker waiting. Only a success refunds a budget, as gRFC A6
// counts: a permanent answer or an attempt that says nothing of the
// downstream is not told.
func tellGuard(cfg *config, done func(error), n int, err error, j judgement, throttled bool) {
	if done != nil {
		switch j {
		case judgedAnswered:
			done(nil)
		case judgedNotCounted:
			done(notCountedError{err})
		default:
			done(err)
		}
	}
	if b := cfg.budget; b != nil && (err == nil || j == judgedFailure) {
		b.Attempted(n, j == judgedFailure, throttled)
	}
}

// retrying asks, before a wait of d after an attempt that called fn, a
// breaker that can tell whether it would refuse the next attempt now,
// then the budget for leave to retry; it returns the call's error if
// either refuses. A wait after a look at a held key is not a retry of the
// downstream: nothing is asked.
func (g *guarding[T]) retrying(c *call, d time.Duration) error {
	g.asked = false
	if !c.ran {
		return nil
	}
	if p, ok := c.cfg.breaker.(interface{ Refuses() error }); ok {
		if err := p.Refuses(); err != nil {
			return c.errorOf(OutcomeRefused, err, nil)
		}
	}
	if b := c.cfg.budget; b != nil {
		if err := b.Retry(d); err != nil {
			return c.errorOf(OutcomeRefused, err, nil)
		}
		g.asked = true
	}
	return nil
}

// waited gives the budget back the wait it allowed.
func (g *guarding[T]) waited(c *call, d time.Duration) error {
	if g.asked {
		g.asked = false
		c.cfg.budget.Waited()
	}
	return nil
}

// unwind tells a breaker that allowed the attempt, when fn or what judges
// its error (WithRetryIf) panicked, that it failed (as gobreaker's own
// Execute counts it), so that a half-open breaker is not left waiting.
func (g *guarding[T]) unwind(*call, *attemptState) {
	if done := g.done; done != nil {
		g.done = nil
		done(errPanicked)
	}
}

// errPanicked is what a breaker and an observer hear of an attempt that
// panicked: its fn, or the WithRetryIf that judged its error.
var errPanicked = errors.New("retry: the attempt panicked")

// notCountedError is what a breaker hears of an attempt that says nothing
// of the downstream: it matches overload.ErrNotCounted and the attempt's
// error.
type notCountedError struct{ err error }

func (e notCountedError) Error() string {
	return overload.ErrNotCounted.Error() + ": " + errorText(e.err)
}
func (e notCountedError) Unwrap() []error { return []error{overload.ErrNotCounted, e.err} }
