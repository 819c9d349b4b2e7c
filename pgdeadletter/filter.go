package pgdeadletter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/pgstore/pgschema"
)

// where returns f as an SQL condition and its arguments. Values are always
// passed as parameters, never put into the SQL text. The condition selects
// the rows whose records f.Match accepts:
//
//   - A name or ID that a text column cannot hold (invalid UTF-8, a NUL
//     byte) is never stored (Put refuses such IDs and stores such names
//     with U+FFFD), so it matches no record; sending it would fail with
//     an error quoting its bytes.
//   - Stored times are whole microseconds, and pgx truncates a bound to
//     the microsecond. For a whole microsecond g and any t, g >= t and
//     g < t hold exactly when they hold for t rounded up to the
//     microsecond, so Since and Until are sent rounded up.
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
		ids := make([]string, 0, len(f.IDs)) // not nil: none left selects nothing
		for _, id := range f.IDs {
			if pgschema.Storable(id) {
				ids = append(ids, id)
			}
		}
		add("id = ANY($?)", ids)
	}
	if f.Name != "" {
		if pgschema.Storable(f.Name) {
			add("name = $?", f.Name)
		} else {
			conds = append(conds, "FALSE")
		}
	}
	if f.Reasons != nil {
		names := make([]string, len(f.Reasons))
		for i, o := range f.Reasons {
			names[i] = o.String()
		}
		add("reason = ANY($?)", names)
	}
	if !f.Since.IsZero() {
		add("gave_up >= $?", ceilMicro(f.Since))
	}
	if !f.Until.IsZero() {
		add("gave_up < $?", ceilMicro(f.Until))
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

// ceilMicro rounds t up to the microsecond.
func ceilMicro(t time.Time) time.Time {
	if c := t.Truncate(time.Microsecond); c.Before(t) {
		return c.Add(time.Microsecond)
	}
	return t
}

// List returns the records f selects, oldest first (by GaveUp, then ID),
// at most f.Limit when set: what f.Select gives on the whole table. An
// error matching [ErrUndecodable] comes with the records of the rows it
// could decode; any other error comes with no records.
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

// Purge deletes the records [Sink.List] would return for f and says how
// many. The zero Filter selects every record, so it empties the table;
// deadletter.Filter{IDs: ids} purges by ID.
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
