package overload

import "time"

// Budget limits the retries of every call that shares it, so that a
// struggling downstream is not buried under them: set it in
// retry.OverloadOptions. [Ratio] and [TokenBucket] are the library's; give
// each downstream its own, shared by the Retriers that call it. Do calls it on
// the call's goroutine, and a hedged call on its hedges' goroutines and
// its hedge timer's, under no lock of its own; implementations must be
// safe for concurrent use and must not block.
type Budget interface {
	// Attempted is told how attempt number attempt of fn ended (1 for
	// the call's first attempt that called fn, even after attempts that
	// only found an idempotency key held), for two kinds of ending only, as gRFC A6
	// counts: a success (failed false), and a failure worth retrying
	// (failed true; throttled when its error carried a server's delay,
	// retry.After, such as HTTP 429 with Retry-After), whether or not
	// attempts are left. It hears nothing of any other attempt: a
	// permanent answer (retry.Permanent, refused by retry.WithRetryIf), one ended
	// by the call's context or a cancellation, one whose error another
	// Retrier gave up on, one whose fn panicked, and one that did not
	// call fn (an idempotent call's replay). An error with a server's
	// delay that WithRetryIf refuses is retried all the same (the server
	// said when to come back) and heard as a throttled failure, so the
	// budget may refuse it; under retry.Permanent it is neither retried nor
	// heard.
	Attempted(attempt int, failed, throttled bool)
	// Retry asks, after a failed attempt that called fn, for leave to wait
	// d and attempt again (not after an attempt that found an idempotency
	// key held, which only looks at the store again). A non-nil error
	// refuses it: Do stops at once, without the wait, with a retry.Error of
	// retry.OutcomeRefused that matches both this error and the last
	// attempt's. A call's first attempt is never asked
	// for, and a server's delay does not bypass the budget.
	Retry(d time.Duration) error
	// Waited is told that a wait of d > 0 that Retry allowed has ended
	// (or was cut short by the context), so that a budget can bound the
	// calls waiting at once.
	Waited()
}
