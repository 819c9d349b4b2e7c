// Package pgdeadletter stores the dead letters of
// github.com/steadfast-go/retry in a PostgreSQL table, where operators can
// list, inspect, purge and redrive them, from many processes at once.
//
//	pool, err := pgxpool.New(ctx, "postgres://app@db/app")
//	sink, err := pgdeadletter.New(pool, nil) // or &pgdeadletter.Options{Table: "billing.dead_letters"}
//	err = sink.Migrate(ctx) // once at start-up; idempotent
//	r, err := retry.New(retry.WithDeadLetter(sink, nil))
//
// A [Sink] is a [retry.DeadLetterSink] and a [deadletter.Source], so
// [deadletter.Redrive] replays its records; [Sink.List] and [Sink.Purge]
// take a [deadletter.Filter]; the cmd/deadletters command lists, shows,
// purges and redrives them from a shell.
//
// Times are kept to the microsecond, PostgreSQL's precision, and read back
// in UTC. [Sink.List]'s Since and Until compare to the nanosecond with the
// stored times, as [deadletter.Filter.Select] does.
//
// Table names follow one rule, shared with pgstore and kept in the package
// [github.com/steadfast-go/retry/pgstore/pgschema]: "table" or
// "schema.table", each part a lower-case unquoted SQL identifier (a
// lower-case letter or underscore, then lower-case letters, digits or
// underscores) that is not a reserved key word of PostgreSQL ("user",
// "select", "order"…: psql reads those as something else unless quoted),
// at most 48 bytes for the table and 63 for the schema. Other names are
// refused with an error wrapping [retry.ErrInvalidOption]. [New] takes
// its settings as an [*Options], whose fields document their defaults; a
// nil *Options gives them all.
//
// # Text
//
// PostgreSQL text cannot hold invalid UTF-8 or NUL bytes. [Sink.Put]
// refuses a record whose ID or IdempotencyKey has them; in the other text
// fields, error messages above all, such bytes are stored as U+FFFD
// rather than losing the record ([pgschema.Text], the rule pgstore
// follows too). The error texts are then bounded as [deadletter.Clip]
// says (4096 bytes each, 64 KiB a record); the payload is stored whole. A
// [deadletter.Filter] Name or ID with such bytes matches nothing, as no
// stored record has it.
//
// # Undecodable rows
//
// A row whose reason this version does not know (written by hand, or by
// a newer version that knows more outcomes) cannot be read back as a
// record; Put never writes one. [Sink.List] skips such rows and returns
// the other records with an error matching [ErrUndecodable] that names
// each skipped record; a skipped row counts towards the filter's Limit,
// so fewer records may come back. [Sink.Pending] skips them without an
// error, so that one of them does not stop [deadletter.Redrive] from
// replaying the others. Fix or purge them by ID (Purge does not decode
// rows).
//
// # Migrating
//
// [Sink.Migrate] creates the table and its indexes; [Sink.Schema] gives
// the same DDL to migration tools. Every process may call Migrate at
// start-up: a transaction-scoped advisory lock on the table runs
// concurrent calls one at a time, since concurrent CREATE … IF NOT EXISTS
// statements can fail in PostgreSQL (see [pgschema.Migrate]). The lock is
// the same for every spelling of the table: a name without a schema is
// resolved to current_schema() first, so sinks configured with "t" and
// "public.t" wait for each other. A named schema must exist already.
package pgdeadletter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/pgstore/pgschema"
)

// ErrNotFound is returned by [Sink.Get] for an ID that has no record.
var ErrNotFound = errors.New("pgdeadletter: dead letter not found")

// ErrUndecodable is matched by the error of [Sink.List] and [Sink.Get] for
// a row that cannot be read back as a record, such as one with a reason
// this version does not know; see Undecodable rows in the package doc.
var ErrUndecodable = errors.New("pgdeadletter: dead letter cannot be decoded")

// Sink keeps dead letters in one PostgreSQL table. Build one with [New]
// (the zero value is not usable); create its table with [Sink.Migrate].
// It is safe for concurrent use, and Sinks in any number of processes may
// share a table: Put and MarkRedriven are single atomic statements. Every
// method returns with ctx's error when ctx is done.
type Sink struct {
	pool  *pgxpool.Pool
	ident pgschema.Table // the table's name, checked
	table string         // ident, quoted for SQL

	put, mark, get string // SQL built once by New
}

// Options configures [New]. The zero value, like a nil *Options, gives
// the defaults; zero means the default in every field.
type Options struct {
	// Table is the table that holds the records, as "table" or
	// "schema.table", so that several sinks (services, tenants, test
	// runs) can share one database. The name follows the rule of
	// [pgschema], which pgstore follows too: each part a lower-case
	// unquoted SQL identifier (a lower-case letter or underscore, then
	// lower-case letters, digits or underscores) that is not a reserved
	// key word of PostgreSQL ([pgschema.Reserved]), at most 48 bytes for
	// the table, so that the index names made from it fit PostgreSQL's
	// limit, and 63 for the schema. Other names are refused with an error
	// wrapping [retry.ErrInvalidOption], never quoted into SQL as given.
	// Without a schema the connection's search_path decides.
	// Default (""): [DefaultTable].
	Table string
}

// New returns a Sink that stores records in pool's database, without
// connecting. pool must not be nil; a nil opts gives the defaults. An
// invalid option gives an error wrapping [retry.ErrInvalidOption] that
// names the field.
func New(pool *pgxpool.Pool, opts *Options) (*Sink, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pgdeadletter: the pool is nil", retry.ErrInvalidOption)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	name := o.Table
	if name == "" {
		name = DefaultTable
	}
	ident, err := pgschema.ParseTable(name)
	if err != nil {
		return nil, fmt.Errorf("%w: pgdeadletter: Options.Table %q: %w", retry.ErrInvalidOption, name, err)
	}
	s := &Sink{pool: pool, ident: ident, table: ident.Quoted()}
	s.put = "INSERT INTO " + s.table + " (" + columns + ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (id) DO NOTHING"
	s.mark = "UPDATE " + s.table + " SET redriven = now() WHERE id = $1 AND redriven IS NULL"
	s.get = "SELECT " + columns + " FROM " + s.table + " WHERE id = $1"
	return s, nil
}

// Table returns the table's name, as given in [Options.Table], or
// [DefaultTable].
func (s *Sink) Table() string { return s.ident.String() }

// columns are the columns a record is written to and read from, in the
// order of putArgs and scan.
const columns = "id, name, idempotency_key, payload, attempts, first_attempt, gave_up, reason, last_error, errors, redrives, redrive_of, redriven"

// Put stores dl and returns nil once the row is committed. It is
// idempotent on dl.ID: a repeated Put leaves the first row stored. dl.ID
// must not be empty, and dl.Reason must be a failure outcome (not
// OutcomeSuccess, nor beyond the known outcomes); Text in the package
// doc says what becomes of the text fields' bytes.
func (s *Sink) Put(ctx context.Context, dl retry.DeadLetter) error {
	switch {
	case dl.ID == "":
		return fmt.Errorf("%w: pgdeadletter: the dead letter has no ID", retry.ErrInvalidOption)
	case !pgschema.Storable(dl.ID):
		return fmt.Errorf("%w: pgdeadletter: dead letter ID %q is not valid UTF-8 or holds a NUL byte", retry.ErrInvalidOption, dl.ID)
	case !pgschema.Storable(dl.IdempotencyKey):
		return fmt.Errorf("%w: pgdeadletter: dead letter %s: its idempotency key is not valid UTF-8 or holds a NUL byte", retry.ErrInvalidOption, dl.ID)
	case !failure(dl.Reason):
		return fmt.Errorf("%w: pgdeadletter: dead letter %s: its reason, outcome %d (%v), is not a failure outcome", retry.ErrInvalidOption, dl.ID, dl.Reason, dl.Reason)
	}
	dl = deadletter.Clip(sanitize(dl)) // clipped last: U+FFFD for an invalid byte is longer
	errs := []byte("[]")
	if len(dl.Errors) > 0 {
		var err error
		if errs, err = json.Marshal(dl.Errors); err != nil {
			return fmt.Errorf("pgdeadletter: encoding dead letter %s: %w", dl.ID, err)
		}
	}
	_, err := s.pool.Exec(ctx, s.put,
		dl.ID, dl.Name, dl.IdempotencyKey, dl.Payload, dl.Attempts,
		nullTime(dl.FirstAttempt), dl.GaveUp, dl.Reason.String(), dl.LastError, string(errs),
		dl.Redrives, dl.RedriveOf, nullTime(dl.Redriven))
	if err != nil {
		return fmt.Errorf("pgdeadletter: storing dead letter %s: %w", dl.ID, err)
	}
	return nil
}

// Get returns the record id, or an error matching [ErrNotFound].
func (s *Sink) Get(ctx context.Context, id string) (retry.DeadLetter, error) {
	rows, err := s.pool.Query(ctx, s.get, id)
	if err != nil {
		return retry.DeadLetter{}, fmt.Errorf("pgdeadletter: reading dead letter %s: %w", id, err)
	}
	recs, bad, err := collect(rows)
	switch {
	case err != nil:
		return retry.DeadLetter{}, fmt.Errorf("pgdeadletter: reading dead letter %s: %w", id, err)
	case len(bad) > 0:
		return retry.DeadLetter{}, bad[0]
	case len(recs) == 0:
		return retry.DeadLetter{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return recs[0], nil
}

// Pending returns the records not yet marked as redriven, oldest first
// (by GaveUp, then ID); see [deadletter.Source]. Rows that cannot be
// decoded are skipped without an error, so that Redrive replays the
// others; [Sink.List] reports them ([ErrUndecodable]).
func (s *Sink) Pending(ctx context.Context) ([]retry.DeadLetter, error) {
	recs, _, err := s.list(ctx, deadletter.Filter{State: deadletter.Pending})
	return recs, err
}

// MarkRedriven marks the record id as redriven, at the server's time, and
// reports whether this call did it: for each id exactly one call ever
// returns true, across goroutines and processes ([deadletter.Source]).
// An unknown id gives false.
func (s *Sink) MarkRedriven(ctx context.Context, id string) (bool, error) {
	tag, err := s.pool.Exec(ctx, s.mark, id)
	if err != nil {
		return false, fmt.Errorf("pgdeadletter: marking dead letter %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

var _ deadletter.Source = (*Sink)(nil)

// sanitize makes the free-text fields of dl storable ([pgschema.Text], the
// rule pgstore follows too). It copies Errors before changing it: the
// caller's record is not touched.
func sanitize(dl retry.DeadLetter) retry.DeadLetter {
	dl.Name, dl.LastError, dl.RedriveOf = pgschema.Text(dl.Name), pgschema.Text(dl.LastError), pgschema.Text(dl.RedriveOf)
	for i, e := range dl.Errors {
		if !pgschema.Storable(e.Error) {
			dl.Errors = slices.Clone(dl.Errors)
			for j := i; j < len(dl.Errors); j++ {
				dl.Errors[j].Error = pgschema.Text(dl.Errors[j].Error)
			}
			break
		}
	}
	return dl
}

// nullTime maps the zero time, which means "unknown" or "not yet" in a
// DeadLetter, to SQL NULL.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// failure reports whether o is an outcome a dead letter can have, the
// test deadletter.Filter.Validate makes of its reasons.
func failure(o retry.Outcome) bool {
	return o != retry.OutcomeSuccess && o <= retry.OutcomeUnknown
}

// collect reads rows of columns into records. A row that cannot be
// decoded is skipped and reported in bad, an error matching
// ErrUndecodable each; err is the query's own failure.
func collect(rows pgx.Rows) (recs []retry.DeadLetter, bad []error, err error) {
	defer rows.Close()
	for rows.Next() {
		dl, err := scan(rows)
		var undecodable *undecodableError
		switch {
		case errors.As(err, &undecodable):
			bad = append(bad, err)
		case err != nil:
			return nil, nil, err
		default:
			recs = append(recs, dl)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	return recs, bad, nil
}

// undecodableError reports a row that was read but is not a record. Its
// text names the record and what is wrong, never a value of its fields.
type undecodableError struct {
	id, what string
	err      error
}

func (e *undecodableError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrUndecodable, e.id, e.what)
}

func (e *undecodableError) Is(target error) bool { return target == ErrUndecodable }
func (e *undecodableError) Unwrap() error        { return e.err }

// scan reads one row of columns. The columns are scanned into types that
// take any value the schema allows, so that Scan, whose failure ends the
// rows, fails only with the connection; the decoding that can fail comes
// after it, and its error is an *undecodableError.
func scan(row pgx.Row) (retry.DeadLetter, error) {
	var (
		dl              retry.DeadLetter
		first, redriven *time.Time
		reason          string
		errs            []byte
	)
	err := row.Scan(&dl.ID, &dl.Name, &dl.IdempotencyKey, &dl.Payload, &dl.Attempts,
		&first, &dl.GaveUp, &reason, &dl.LastError, &errs,
		&dl.Redrives, &dl.RedriveOf, &redriven)
	if err != nil {
		return dl, err
	}
	if first != nil {
		dl.FirstAttempt = first.UTC()
	}
	if redriven != nil {
		dl.Redriven = redriven.UTC()
	}
	dl.GaveUp = dl.GaveUp.UTC()
	if err := dl.Reason.UnmarshalText([]byte(reason)); err != nil {
		return dl, &undecodableError{id: dl.ID, what: fmt.Sprintf("its reason %q is not an outcome this version knows", reason), err: err}
	}
	if err := json.Unmarshal(errs, &dl.Errors); err != nil {
		return dl, &undecodableError{id: dl.ID, what: fmt.Sprintf("its attempt errors do not decode (%T)", err), err: err}
	}
	if len(dl.Errors) == 0 {
		dl.Errors = nil
	}
	return dl, nil
}
