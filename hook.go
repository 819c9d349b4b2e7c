package retry

import (
	"context"
	"math"
	"time"
)

// hook is one feature's part in one call of Do. There are two kinds.
// Round hooks (idemCall, deadLettering, handingOff: the whole call) keep
// per-call state in themselves and run on the caller's goroutine only.
// Attempt hooks (the guard, the observer, the attempt timeout: one
// attempt each) keep their state in the attempt and read only the
// immutable config, so a hedge runs them on its own goroutine through the
// same functions (attempt.go). runCall knows no hook by name: the
// dispatcher (hooks.go) calls them at fixed points, in order, never under
// a lock. noHook gives the methods a feature does not need.
type hook[T any] interface {
	// begin runs before the first attempt, while the context is live;
	// endCall ends the call at once with v and err (a replayed outcome, or
	// an *Error for a call refused before any attempt).
	begin(c *call) (v T, err error, act action)
	// before runs before each attempt, c.attempts counting it. skipFn
	// makes v and err the attempt's result without calling fn (another
	// caller holds the key; its outcome was replayed); endCall ends the call
	// with them (a breaker refused the attempt).
	before(c *call, a *attemptState) (v T, err error, act action)
	// fnContext returns the context fn gets, derived from ctx.
	fnContext(c *call, a *attemptState, ctx context.Context) context.Context
	// after runs when the attempt returned v and err, and returns the
	// attempt's result, which it may replace (a success whose outcome
	// could not be recorded).
	after(c *call, a *attemptState, v T, err error) (T, error)
	// decided runs when the policy decided on the last attempt's error err: a
	// budget and a breaker hear of it.
	decided(c *call, err error, next decision)
	// retrying runs before a wait of d for another attempt; an error
	// refuses it and ends the call.
	retrying(c *call, d time.Duration) error
	// waited runs when a wait of d ended, by its timer, by the call's
	// context (which the loop then finds ended) or by the process
	// stopping; an error ends the call (its rest was handed off).
	waited(c *call, d time.Duration) error
	// end runs once, when the call ends with v and err (nil, or an
	// *Error), fills in its part of the Done event and returns what Do
	// returns.
	end(c *call, v T, err error, d *Done) (T, error)
	// unwind runs when fn or a hook panicked; a is the attempt under way,
	// or nil.
	unwind(c *call, a *attemptState)
}

// attemptState is the hooks' state for one attempt: it lives in the frame
// of the hooks' dispatcher while the attempt runs.
type attemptState struct {
	cancel   context.CancelFunc // the attempt timeout's
	start    time.Duration      // the attempt's start since the call's, for the observer and a timed limit (0 for attempt 1)
	number   int32              // the attempt whose result the hooks see, if not c.attempts: a hedge's (32 bits: it fits in observed's padding)
	observed bool               // the observer heard it start and not yet end
}

// attemptNumber is k as attemptState keeps it; past 2³¹-1 attempts, a
// count no call reaches, it says so.
func attemptNumber(k int) int32 { return int32(min(k, math.MaxInt32)) }

// attempt is the number of the attempt whose result the hooks see.
func (a *attemptState) attempt(c *call) int {
	if a.number != 0 {
		return int(a.number)
	}
	return c.attempts
}

// action is what a hook's begin or before says of the attempt.
type action uint8

const (
	runFn   action = iota // call fn
	skipFn                // v and err are the attempt's result; fn is not called
	endCall               // v and err end the call
)

// noHook is the part of the seam a feature leaves alone; features embed it.
type noHook[T any] struct{}

func (noHook[T]) begin(*call) (v T, err error, act action) { return v, nil, runFn }
func (noHook[T]) before(*call, *attemptState) (v T, err error, act action) {
	return v, nil, runFn
}
func (noHook[T]) fnContext(_ *call, _ *attemptState, ctx context.Context) context.Context { return ctx }
func (noHook[T]) after(_ *call, _ *attemptState, v T, err error) (T, error)               { return v, err }
func (noHook[T]) decided(*call, error, decision)                                          {}
func (noHook[T]) retrying(*call, time.Duration) error                                     { return nil }
func (noHook[T]) waited(*call, time.Duration) error                                       { return nil }
func (noHook[T]) end(_ *call, v T, err error, _ *Done) (T, error)                         { return v, err }
func (noHook[T]) unwind(*call, *attemptState)                                             {}
