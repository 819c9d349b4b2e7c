package deadletter

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/steadfast-go/retry"
)

// State selects records by whether they were redriven.
type State uint8

// The states a [Filter] can select.
const (
	AnyState State = iota // every record
	Pending               // not yet marked as redriven
	Redriven              // marked as redriven
)

// Filter selects dead letters for the sinks' List and Purge, here and in
// pgdeadletter. Each field set narrows the selection; the zero Filter
// selects every record, but a non-nil empty IDs or Reasons selects none.
type Filter struct {
	IDs     []string        // when not nil, these record IDs only
	Name    string          // the operation's name, exactly
	Reasons []retry.Outcome // when not nil, any of these reasons
	Since   time.Time       // gave up at or after Since
	Until   time.Time       // gave up before Until
	State   State           // Pending or Redriven records only; AnyState, the zero value, for both
	// Limit caps the number of records, the oldest first; 0 means no cap.
	Limit int
}

// Validate reports, wrapping [retry.ErrInvalidOption], a negative limit,
// an unknown state, Since not before Until, or a non-failure reason.
// List, Purge and Select call it.
func (f Filter) Validate() error {
	switch {
	case f.Limit < 0:
		return fmt.Errorf("%w: deadletter: filter limit %d is negative", retry.ErrInvalidOption, f.Limit)
	case f.State > Redriven:
		return fmt.Errorf("%w: deadletter: unknown filter state %d", retry.ErrInvalidOption, f.State)
	case !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until):
		return fmt.Errorf("%w: deadletter: filter since %s is not before until %s", retry.ErrInvalidOption, f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339))
	}
	for _, o := range f.Reasons {
		if !failure(o) {
			return fmt.Errorf("%w: deadletter: filter reason %v is not a failure outcome", retry.ErrInvalidOption, o)
		}
	}
	return nil
}

// Match reports whether f selects dl, ignoring Limit.
func (f Filter) Match(dl retry.DeadLetter) bool {
	switch {
	case f.IDs != nil && !slices.Contains(f.IDs, dl.ID):
		return false
	case f.Name != "" && dl.Name != f.Name:
		return false
	case f.Reasons != nil && !slices.Contains(f.Reasons, dl.Reason):
		return false
	case !f.Since.IsZero() && dl.GaveUp.Before(f.Since):
		return false
	case !f.Until.IsZero() && !dl.GaveUp.Before(f.Until):
		return false
	case f.State == Pending && !dl.Redriven.IsZero():
		return false
	case f.State == Redriven && dl.Redriven.IsZero():
		return false
	}
	return true
}

// Select returns the records of recs that f selects, oldest first (by
// GaveUp, then ID) and at most f.Limit of them, as the sinks' List does.
// recs is not changed.
func (f Filter) Select(recs []retry.DeadLetter) ([]retry.DeadLetter, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	var out []retry.DeadLetter
	for _, dl := range recs {
		if f.Match(dl) {
			out = append(out, dl)
		}
	}
	slices.SortStableFunc(out, func(a, b retry.DeadLetter) int {
		return oldestFirst(a.GaveUp, a.ID, b.GaveUp, b.ID)
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// failure reports whether o is an outcome a dead letter can have: the
// test of Validate for its reasons and of MemorySink and FileSink Put.
func failure(o retry.Outcome) bool {
	return o != retry.OutcomeSuccess && o <= retry.OutcomeUnknown
}

// oldestFirst compares two records, a and b, by GaveUp, then ID: the
// order of Select, and of ScanFile, which sorts without the records.
func oldestFirst(aGaveUp time.Time, aID string, bGaveUp time.Time, bID string) int {
	return cmp.Or(aGaveUp.Compare(bGaveUp), strings.Compare(aID, bID))
}
