package pgdeadletter

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/steadfast-go/retry"
)

// State selects records by whether they were redriven.
type State uint8

// The states a [Filter] can select.
const (
	AnyState State = iota // every record
	Pending               // not yet claimed for redrive
	Redriven              // claimed for redrive
)

// Filter selects dead letters for [Sink.List] and [Sink.Purge]. Each
// field that is set narrows the selection; the zero Filter selects every
// record.
//
// A non-nil empty IDs or Reasons selects nothing, so that purging an
// empty selection of IDs deletes nothing rather than everything.
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

// Validate reports a Filter that cannot select anything meaningful: a
// negative limit, an unknown state, since not before until, or a reason
// that is not a failure outcome. The error wraps [retry.ErrInvalidOption].
// List, Purge and Select call it.
func (f Filter) Validate() error {
	switch {
	case f.Limit < 0:
		return fmt.Errorf("%w: pgdeadletter: filter limit %d is negative", retry.ErrInvalidOption, f.Limit)
	case f.State > Redriven:
		return fmt.Errorf("%w: pgdeadletter: unknown filter state %d", retry.ErrInvalidOption, f.State)
	case !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until):
		return fmt.Errorf("%w: pgdeadletter: filter since %s is not before until %s", retry.ErrInvalidOption, f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339))
	}
	for _, o := range f.Reasons {
		if o == retry.OutcomeSuccess || o > retry.OutcomeCanceled {
			return fmt.Errorf("%w: pgdeadletter: filter reason %v is not a failure outcome", retry.ErrInvalidOption, o)
		}
	}
	return nil
}

// Match reports whether f selects dl, ignoring Limit. It is the same test
// that List runs in SQL, for records kept elsewhere, such as in a file.
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
// GaveUp, then ID) and at most f.Limit of them, as List would. recs is
// not changed.
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
		return cmp.Or(a.GaveUp.Compare(b.GaveUp), strings.Compare(a.ID, b.ID))
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// where returns f as an SQL condition and its arguments. Values are always
// passed as parameters, never put into the SQL text.
func (f Filter) where() (string, []any) {
	var (
		conds []string
		args  []any
	)
	add := func(cond string, arg any) {
		args = append(args, arg)
		conds = append(conds, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	if f.IDs != nil {
		add("id = ANY($?)", f.IDs)
	}
	if f.Name != "" {
		add("name = $?", f.Name)
	}
	if f.Reasons != nil {
		names := make([]string, len(f.Reasons))
		for i, o := range f.Reasons {
			names[i] = o.String()
		}
		add("reason = ANY($?)", names)
	}
	if !f.Since.IsZero() {
		add("gave_up >= $?", f.Since)
	}
	if !f.Until.IsZero() {
		add("gave_up < $?", f.Until)
	}
	switch f.State {
	case Pending:
		conds = append(conds, "redriven IS NULL")
	case Redriven:
		conds = append(conds, "redriven IS NOT NULL")
	}
	if len(conds) == 0 {
		return "TRUE", nil
	}
	return strings.Join(conds, " AND "), args
}

// List returns the records f selects, oldest first (by GaveUp, then ID),
// at most f.Limit of them when it is set.
func (s *Sink) List(ctx context.Context, f Filter) ([]retry.DeadLetter, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	cond, args := f.where()
	q := "SELECT " + columns + " FROM " + s.table + " WHERE " + cond + " ORDER BY gave_up, id"
	if f.Limit > 0 {
		q += " LIMIT " + strconv.Itoa(f.Limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err == nil {
		var recs []retry.DeadLetter
		if recs, err = collect(rows); err == nil {
			return recs, nil
		}
	}
	return nil, fmt.Errorf("pgdeadletter: listing dead letters: %w", err)
}

// Purge deletes the records f selects (the oldest f.Limit of them when
// Limit is set) and returns how many it deleted. The zero Filter selects
// every record: Purge(ctx, Filter{}) empties the table. Purge by ID with
// Filter{IDs: ids}.
func (s *Sink) Purge(ctx context.Context, f Filter) (int64, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	cond, args := f.where()
	q := "DELETE FROM " + s.table + " WHERE " + cond
	if f.Limit > 0 {
		q = "DELETE FROM " + s.table + " WHERE id IN (SELECT id FROM " + s.table + " WHERE " + cond +
			" ORDER BY gave_up, id LIMIT " + strconv.Itoa(f.Limit) + ")"
	}
	tag, err := s.pool.Exec(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("pgdeadletter: purging dead letters: %w", err)
	}
	return tag.RowsAffected(), nil
}
