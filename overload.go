package retry

import (
	"time"

	"github.com/benbjohnson/clock"

	"github.com/steadfast-go/retry/overload"
)

// Budget limits the retries of every call that shares it, so that a
// struggling downstream is not buried under them; pass one to [WithBudget].
// [overload.Ratio] and [overload.TokenBucket] are the library's; give each
// downstream its own, shared by the Retriers that call it. Do calls it on
// the call's goroutine, and a hedged call on its hedges' goroutines and
// its hedge timer's, under no lock of its own; implementations must be
// safe for concurrent use and must not block.
type Budget interface {
	// Attempted is told how attempt number attempt of fn ended (1 for
	// the call's first attempt that called fn, even after attempts that
	// only found an idempotency key held), for two kinds of ending only, as gRFC A6
	// counts: a success (failed false), and a failure worth retrying
	// (failed true; throttled when its error carried a server's delay,
	// [After], such as HTTP 429 with Retry-After), whether or not
	// attempts are left. It hears nothing of any other attempt: a
	// permanent answer ([Permanent], refused by [WithRetryIf]), one ended
	// by the call's context or a cancellation, one whose error another
	// Retrier gave up on, one whose fn panicked, and one that did not
	// call fn (an idempotent call's replay). An error with a server's
	// delay that WithRetryIf refuses is retried all the same (the server
	// said when to come back) and heard as a throttled failure, so the
	// budget may refuse it; under [Permanent] it is neither retried nor
	// heard.
	Attempted(attempt int, failed, throttled bool)
	// Retry asks, after a failed attempt that called fn, for leave to wait
	// d and attempt again (not after an attempt that found an idempotency
	// key held, which only looks at the store again). A non-nil error
	// refuses it: Do stops at once, without the wait, with an [*Error]
	// of [OutcomeRefused] that matches both this
	// error and the last attempt's. A call's first attempt is never asked
	// for, and a server's delay does not bypass the budget.
	Retry(d time.Duration) error
	// Waited is told that a wait of d > 0 that Retry allowed has ended
	// (or was cut short by the context), so that a budget can bound the
	// calls waiting at once.
	Waited()
}

// Breaker is a circuit breaker's gate, asked before every attempt; pass one
// to [WithBreaker] (retrygobreaker adapts sony/gobreaker). Implementations
// must be safe for concurrent use and must not block. Breakers in the
// package doc says what Do does with Allow's refusal, what it tells done,
// and the optional Refuses method.
type Breaker interface {
	Allow() (done func(err error), err error)
}

// WithBudget sets the retry budget the Retrier's calls share with every
// other call given b; nil removes it, leaving [WithMaxAttempts]. Default:
// for [New], a budget of the Retrier's own (Budgets in the package doc
// gives it); [Do], [DoValue] and the zero Retrier have none.
func WithBudget(b Budget) Option {
	if s, isNil := nilArg(b); isNil && b != nil {
		return invalid("WithBudget(%s): pass a nil interface to remove the budget", s)
	}
	return Option{set: setBudget, v: b}
}

// WithBreaker puts a circuit breaker's gate before every attempt; see
// [Breaker]. b must not be nil, nor hold a nil pointer. Default: none.
func WithBreaker(b Breaker) Option {
	if s, isNil := nilArg(b); isNil {
		return invalid("WithBreaker(%s): the breaker must not be nil", s)
	}
	return Option{set: setBreaker, v: b}
}

// WithNestedRetries lets this Retrier retry an error another Retrier gave
// up on: an [*Error] of [OutcomeExhausted], [OutcomeMaxElapsed],
// [OutcomeRefused] or [OutcomeUnknown] in fn's error. By default such an
// error ends the call at once with the inner Outcome, so that only one
// layer retries: three nested layers of 3 attempts reach the leaf 3 times,
// not 27.
func WithNestedRetries() Option {
	return Option{set: setNestedRetries}
}

// defaultBudget is the budget New gives a Retrier without WithBudget: a
// ratio budget with its defaults, on the Retrier's clock (nil: real time).
// The zero options are valid, as a test checks, so err is always nil.
func defaultBudget(clk clock.Clock) *overload.Ratio {
	b, _ := overload.NewRatio(overload.RatioOptions{Clock: clk})
	return b
}
