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
)

// alwaysRetried is implemented by the errors of attempts that a hook
// refused for now, to be tried again whatever WithRetryIf says (another
// caller holds the idempotency key).
type alwaysRetried interface{ alwaysRetried() }

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
	switch {
	case IsPermanent(err):
		return 0, stopPermanent
	case ctxDone:
		return 0, stopContext
	case errors.Is(err, context.Canceled):
		// Someone cancelled the work on purpose; another attempt would
		// be cancelled too.
		return 0, stopPermanent
	}
	hint, hinted := retryAfterOf(err)
	if _, always := err.(alwaysRetried); !hinted && !always && cfg.retryIf != nil && !cfg.retryIf(err) {
		return 0, stopPermanent
	}
	if attempt >= maxAttempts {
		return 0, stopExhausted
	}
	d := cfg.wait(attempt, prev, hint, hinted)
	switch {
	case cfg.maxElapsed > 0 && d >= cfg.maxElapsed-elapsed:
		return d, stopMaxElapsed
	case hasDeadline && d >= left:
		return d, stopDeadline
	}
	return d, wait
}

// wait computes the wait after attempt failed: jitter(backoff(attempt)),
// or hint for a server-supplied delay, each within its cap (see resolve).
func (cfg *config) wait(attempt int, prev, hint time.Duration, hinted bool) time.Duration {
	if hinted {
		return min(hint, cfg.hintCap)
	}
	b := cfg.backoff
	d := max(b.Delay(attempt, prev, cfg.random()), 0)
	if _, random := b.(decorrelated); !random && cfg.jitter != NoJitter {
		d = cfg.jitter.Apply(d, cfg.random())
	}
	if cfg.backoffCap > 0 {
		d = min(d, cfg.backoffCap)
	}
	return d
}

func (cfg *config) random() float64 {
	if cfg.rand == nil {
		return rand.Float64()
	}
	return cfg.rand.float64()
}
