package adapter

import (
	"fmt"
	"slices"

	"github.com/steadfast-go/retry"
)

// BudgetDenied is the outcome label value reserved for calls refused by a
// retry budget. No call has it yet.
const BudgetDenied = "budget-denied"

// Outcomes returns the outcome label values, indexed by retry.Outcome,
// then BudgetDenied.
func Outcomes() []string {
	return []string{
		retry.OutcomeSuccess.String(), retry.OutcomePermanent.String(),
		retry.OutcomeExhausted.String(), retry.OutcomeMaxElapsed.String(),
		retry.OutcomeDeadline.String(), retry.OutcomeCanceled.String(),
		BudgetDenied,
	}
}

// AttemptBuckets returns the bounds of the attempts-per-call histogram,
// the same as retry.Stats uses.
func AttemptBuckets() []float64 { return []float64{1, 2, 3, 4, 5, 10, 100, 1000} }

// DurationBuckets returns the bounds of the call-duration histogram in
// seconds: custom, if not nil, or the default, the same as retry.Stats
// uses. The error, for bounds that are empty or not increasing, wraps
// retry.ErrInvalidOption and names the caller.
func DurationBuckets(caller string, custom []float64) ([]float64, error) {
	if custom == nil {
		return []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}, nil
	}
	ok := len(custom) > 0
	for i := 1; i < len(custom) && ok; i++ {
		ok = custom[i] > custom[i-1]
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s: DurationBuckets %v must be one or more increasing bounds", retry.ErrInvalidOption, caller, custom)
	}
	return slices.Clone(custom), nil
}

// Limit returns the limit of operation names for MaxOperations max: the
// default for 0, or an error wrapping retry.ErrInvalidOption for a
// negative max.
func Limit(caller string, max, def int) (int, error) {
	switch {
	case max < 0:
		return 0, fmt.Errorf("%w: %s: MaxOperations %d is negative", retry.ErrInvalidOption, caller, max)
	case max == 0:
		return def, nil
	}
	return max, nil
}

// OutcomeIndex returns the index of o's label in Outcomes: o itself for
// the outcomes known today, the index of its name for a later one (such as
// a budget-denied outcome), or -1 for an unknown one.
func OutcomeIndex(o retry.Outcome) int {
	if o <= retry.OutcomeCanceled {
		return int(o)
	}
	return slices.Index(Outcomes(), o.String())
}
