package retry

import (
	"github.com/benbjohnson/clock"

	"github.com/steadfast-go/retry/overload"
)

// OverloadOptions are the settings of [WithOverload]. A field left at its
// zero value leaves its setting as it is, so WithOverload options add up.
type OverloadOptions struct {
	// Budget limits the retries of every call that shares it, so that a
	// struggling downstream is not buried under them: [overload.Ratio] or
	// [overload.TokenBucket], one per downstream. Default: for [New], a
	// budget of the Retrier's own (Budgets in the package doc gives it);
	// [Do], [DoValue] and the zero Retrier have none.
	Budget overload.Budget
	// NoBudget removes the budget, leaving [WithMaxAttempts]. It cannot
	// be set with Budget.
	NoBudget bool
	// Breaker is a circuit breaker's gate asked before every attempt
	// (retrygobreaker adapts sony/gobreaker). Default: none.
	Breaker overload.Breaker
	// Limit bounds the attempts in flight to the downstream, hedges
	// included: [overload.Adaptive], one per downstream. Each attempt
	// takes a permit after the breaker allowed it. Default: none.
	Limit overload.Limit
	// Rate bounds the attempts per second to the downstream, hedges
	// included: [overload.Rate] in one process, the redislimit module's
	// across a fleet; one per downstream. It is asked after the breaker,
	// before the limit. Default: none.
	Rate overload.RateLimit
	// Pause holds every call's next attempt, first attempts included,
	// while the downstream is rate-limited: an attempt whose error
	// carries a server's delay ([After]: Retry-After, gRPC pushback)
	// pauses it, and the held attempts go spread over
	// PauseOptions.Spread after the end; no hedge is sent while it is
	// paused. A call whose deadline comes first ends at once, refused
	// ([overload.ErrPaused]); one with [WithHandOff] hands a long pause
	// off as it would a wait. One per downstream. Default: none.
	Pause *overload.Pause
	// NestedRetries lets this Retrier retry an error another Retrier gave
	// up on: an [*Error] of [OutcomeExhausted], [OutcomeMaxElapsed],
	// [OutcomeRefused] or [OutcomeUnknown] in fn's error. By default such
	// an error ends the call at once with the inner Outcome, so that only
	// one layer retries: three nested layers of 3 attempts reach the leaf
	// 3 times, not 27.
	NestedRetries bool
}

// WithOverload sets what keeps the Retrier's calls from burying a
// struggling downstream: a retry budget, a circuit breaker, limits on
// attempts in flight and per second, a shared pause, and whether errors
// other Retriers gave up on are retried. nil changes nothing.
func WithOverload(o *OverloadOptions) Option {
	if o == nil {
		return Option{set: setOverload, v: &OverloadOptions{}}
	}
	if s, isNil := nilArg(o.Budget); isNil && o.Budget != nil {
		return invalid("WithOverload: Budget is %s; leave it nil, or set NoBudget to remove the budget", s)
	}
	if s, isNil := nilArg(o.Breaker); isNil && o.Breaker != nil {
		return invalid("WithOverload: Breaker is %s; leave it nil for none", s)
	}
	if s, isNil := nilArg(o.Limit); isNil && o.Limit != nil {
		return invalid("WithOverload: Limit is %s; leave it nil for none", s)
	}
	if s, isNil := nilArg(o.Rate); isNil && o.Rate != nil {
		return invalid("WithOverload: Rate is %s; leave it nil for none", s)
	}
	if o.Budget != nil && o.NoBudget {
		return invalid("WithOverload: both Budget and NoBudget are set")
	}
	c := *o
	return Option{set: setOverload, v: &c}
}

// setsBudget says whether o sets the budget, New's default then unused.
func setsBudget(o Option) bool {
	ov, ok := o.v.(*OverloadOptions)
	return ok && o.set == setOverload && (ov.Budget != nil || ov.NoBudget)
}

// defaultBudget is the budget New gives a Retrier without OverloadOptions.Budget: a
// ratio budget with its defaults, on the Retrier's clock (nil: real time).
// The zero options are valid, as a test checks, so err is always nil.
func defaultBudget(clk clock.Clock) *overload.Ratio {
	b, _ := overload.NewRatio(overload.RatioOptions{Clock: clk})
	return b
}
