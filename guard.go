package retry

import (
	"time"

	"github.com/steadfast-go/retry/overload"
)

// guarding is the hook of OverloadOptions.Budget, Breaker, Rate, Limit
// and Pause: the pause holds each attempt while it is in force (hold); the
// breaker, the rate, then the limit, are asked before each attempt that
// calls fn, and the breaker and the limit hear how it ended; the budget
// hears every such attempt, and is asked before each retry of one.
type guarding[T any] struct {
	noHook[T]
	attemptGuard // the last attempt's, and the call's reached and asked
}

func (g *guarding[T]) before(c *call, a *attemptState) (v T, err error, act action) {
	k := overload.RetryAttempt
	if !g.reached && c.cfg.resume == nil {
		k = overload.FirstAttempt // the call's first to call fn
	}
	if why := g.admit(c, a, k); why != nil {
		c.attempts-- // no attempt was made
		return v, c.errorOf(OutcomeRefused, why, nil), endCall
	}
	return v, nil, runFn
}

// hold holds the call's next attempt while its downstream is paused
// (OverloadOptions.Pause), before any other hook of the attempt: an
// idempotency claim is renewed after a hold, never held through it.
func (g *guarding[T]) hold(c *call) error {
	c.attempts-- // none is made while held
	if err := holdForPause(c); err != nil {
		return err
	}
	c.attempts++
	return nil
}

// after tells of a success at once, before any hook after it can panic:
// the downstream answered. A failure is told once the policy has decided
// on it (see decided).
func (g *guarding[T]) after(c *call, a *attemptState, v T, err error) (T, error) {
	g.timeAttempt(c, a)
	if err == nil && c.ran {
		g.tell(c, nil, judgedAnswered, false)
	}
	return v, err
}

// decided tells of a failed attempt on which the policy decided.
func (g *guarding[T]) decided(c *call, err error, next decision) {
	if c.ran {
		g.tell(c, err, judged(next.verdict), next.hinted)
	}
}

// tell passes the judgement of the loop's last attempt on, once (see
// attemptGuard.judge), numbering it for the budget.
func (g *guarding[T]) tell(c *call, err error, j judgement, throttled bool) {
	if g.told {
		return
	}
	n := c.attempts
	if !g.reached {
		// The call's first attempt to call fn is attempt 1 to the
		// budget, even after looks at a held key (FailWhileHeld), which
		// spend attempts but reach no downstream: a Ratio counts the
		// call then.
		n, g.reached = 1, true
	}
	g.judge(c.cfg, n, err, j, throttled)
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
	if why := mayRetry(c.cfg, d); why != nil {
		return c.errorOf(OutcomeRefused, why, nil)
	}
	g.asked = c.cfg.budget != nil
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
// Execute counts it), so that a half-open breaker is not left waiting,
// and gives the limit's permit back.
func (g *guarding[T]) unwind(c *call, _ *attemptState) { g.abort(c.cfg) }
