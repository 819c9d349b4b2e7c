package pgdeadletter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

// where returns f as an SQL condition and its arguments. Values are always
// passed as parameters, never put into the SQL text.
func where(f deadletter.Filter) (string, []any) {
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
	case deadletter.Pending:
		conds = append(conds, "redriven IS NULL")
	case deadletter.Redriven:
		conds = append(conds, "redriven IS NOT NULL")
	}
	if len(conds) == 0 {
		return "TRUE", nil
	}
	return strings.Join(conds, " AND "), args
}

// List returns the records f selects, oldest first (by GaveUp, then ID),
// at most f.Limit of them when it is set: the same records as
// f.Select on the whole table.
//
// A selected row that cannot be decoded (see [ErrUndecodable]) is
// skipped: List returns the other records together with an error
// matching ErrUndecodable that names each skipped one. Such a row counts
// towards f.Limit, so fewer than f.Limit records may come back. Any other
// error means nothing could be listed, and no records are returned.
func (s *Sink) List(ctx context.Context, f deadletter.Filter) ([]retry.DeadLetter, error) {
	recs, bad, err := s.list(ctx, f)
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return recs, fmt.Errorf("pgdeadletter: listing dead letters: %d skipped: %w", len(bad), errors.Join(bad...))
	}
	return recs, nil
}

// list is List, with the undecodable rows apart.
func (s *Sink) list(ctx context.Context, f deadletter.Filter) (recs []retry.DeadLetter, bad []error, err error) {
	if err := f.Validate(); err != nil {
		return nil, nil, err
	}
	cond, args := where(f)
	q := "SELECT " + columns + " FROM " + s.table + " WHERE " + cond + " ORDER BY gave_up, id"
	if f.Limit > 0 {
		q += " LIMIT " + strconv.Itoa(f.Limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err == nil {
		if recs, bad, err = collect(rows); err == nil {
			return recs, bad, nil
		}
	}
	return nil, nil, fmt.Errorf("pgdeadletter: listing dead letters: %w", err)
}

// Purge deletes the records f selects (the oldest f.Limit of them when
// Limit is set) and returns how many it deleted. The zero Filter selects
// every record: Purge(ctx, deadletter.Filter{}) empties the table. Purge
// by ID with deadletter.Filter{IDs: ids}.
func (s *Sink) Purge(ctx context.Context, f deadletter.Filter) (int, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	cond, args := where(f)
	q := "DELETE FROM " + s.table + " WHERE " + cond
	if f.Limit > 0 {
		q = "DELETE FROM " + s.table + " WHERE id IN (SELECT id FROM " + s.table + " WHERE " + cond +
			" ORDER BY gave_up, id LIMIT " + strconv.Itoa(f.Limit) + ")"
	}
	tag, err := s.pool.Exec(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("pgdeadletter: purging dead letters: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
