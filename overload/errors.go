package overload

import "errors"

// ErrBudgetExhausted is matched (errors.Is) by the error of a call whose
// retry a budget refused: the budget was spent, or MaxWaiting calls were
// already waiting. The call's retry.Error also matches its last
// attempt's error.
var ErrBudgetExhausted = errors.New("retry budget exhausted")

// ErrCircuitOpen is matched (errors.Is) by the error of a call whose
// attempt a circuit breaker refused: fn was not called. Breakers given to
// retry.WithOverload wrap it in the error they refuse with.
var ErrCircuitOpen = errors.New("circuit open")

// ErrNotCounted is matched by what Do tells a [Breaker] of an attempt
// that says nothing of the downstream (the call's context ended it, it
// was cancelled, or another Retrier gave up on its error): count it
// neither way
// (gobreaker: Settings.IsExcluded).
var ErrNotCounted = errors.New("attempt not counted: it says nothing of the downstream")

// ErrPaused is matched (errors.Is) by the error of a call whose attempt
// a [Pause] held past the call's deadline: the call ends at once, as a
// wait past the deadline does, with its last attempt's error if it made
// one. The call ends with retry.OutcomeRefused.
var ErrPaused = errors.New("downstream paused: it asked for a pause that outlasts the call's deadline")

// Refuser says who refused a call: a budget, a breaker, a limit, a rate
// limit or a pause. The
// zero value is [NotRefused].
type Refuser uint8

// The refusers.
const (
	NotRefused       Refuser = iota // the error matches none of the refusals below
	RefusedByBudget                 // [ErrBudgetExhausted]
	RefusedByBreaker                // [ErrCircuitOpen]
	RefusedByLimit                  // [ErrLimitExceeded]
	RefusedByRate                   // [ErrRateLimited]
	RefusedByPause                  // [ErrPaused]
)

// RefuserOf returns who refused a call that ended with err: the first of
// [ErrBudgetExhausted], [ErrCircuitOpen], [ErrLimitExceeded],
// [ErrRateLimited] and [ErrPaused] that err matches, for metrics and logs
// that say who refused it.
func RefuserOf(err error) Refuser {
	switch {
	case err == nil:
		return NotRefused
	case errors.Is(err, ErrBudgetExhausted):
		return RefusedByBudget
	case errors.Is(err, ErrCircuitOpen):
		return RefusedByBreaker
	case errors.Is(err, ErrLimitExceeded):
		return RefusedByLimit
	case errors.Is(err, ErrRateLimited):
		return RefusedByRate
	case errors.Is(err, ErrPaused):
		return RefusedByPause
	}
	return NotRefused
}

// String returns "budget", "breaker", "limit", "rate" or "pause", the label metrics and
// logs give the refuser, or "" for NotRefused and unknown values.
func (r Refuser) String() string {
	switch r {
	case RefusedByBudget:
		return "budget"
	case RefusedByBreaker:
		return "breaker"
	case RefusedByLimit:
		return "limit"
	case RefusedByRate:
		return "rate"
	case RefusedByPause:
		return "pause"
	}
	return ""
}
