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
