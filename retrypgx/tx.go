package retrypgx

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"

	"github.com/jackc/pgx/v5"
	"github.com/steadfast-go/retry"
)

// Beginner begins pgx transactions: a *pgxpool.Pool or a *pgx.Conn. A pool
// is what survives a lost connection: a *pgx.Conn stays closed.
type Beginner interface {
	BeginTx(ctx context.Context, txOptions pgx.TxOptions) (pgx.Tx, error)
}

// SQLBeginner begins database/sql transactions: a *sql.DB or a *sql.Conn,
// with any PostgreSQL driver (pgx's stdlib, lib/pq).
type SQLBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// Tx runs fn in a transaction begun on db with txOptions (isolation level,
// read-only, deferrable, as given) and commits it. When the database says
// to try again (see Classify), the transaction is rolled back and fn runs
// again, whole, in a new one, on the Runner's policy; every other error
// ends the call, marked [retry.Permanent]. fn gets the attempt's context;
// it must not commit or roll back tx. The error is nil or holds a
// [*retry.Error]; one of a COMMIT whose outcome is unknown matches
// [ErrCommitOutcomeUnknown]. Bad input gives [retry.ErrInvalidOption].
func (x *Runner) Tx(ctx context.Context, db Beginner, txOptions pgx.TxOptions, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if fn == nil {
		return badInput(x, isNil(db), "fn is nil")
	}
	_, err := TxValue(ctx, x, db, txOptions, func(ctx context.Context, tx pgx.Tx) (struct{}, error) {
		return struct{}{}, fn(ctx, tx)
	})
	return err
}

// TxValue is [Runner.Tx] for a function that returns a value: the value of
// the attempt that committed, or the one [retry.WithIdempotency] replayed.
func TxValue[T any](ctx context.Context, x *Runner, db Beginner, txOptions pgx.TxOptions, fn func(ctx context.Context, tx pgx.Tx) (T, error)) (T, error) {
	if x == nil || isNil(db) || fn == nil {
		var zero T
		return zero, badInput(x, isNil(db), "fn is nil")
	}
	c := &call[pgx.Tx, T]{x: x, fn: fn, driver: pgxDriver{db: db, opts: txOptions}}
	return c.run(ctx)
}

// SQLTx is [Runner.Tx] for database/sql: fn runs in a transaction begun on
// db with opts (nil for the driver's defaults), classified alike.
func (x *Runner) SQLTx(ctx context.Context, db SQLBeginner, opts *sql.TxOptions, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if fn == nil {
		return badInput(x, isNil(db), "fn is nil")
	}
	_, err := SQLTxValue(ctx, x, db, opts, func(ctx context.Context, tx *sql.Tx) (struct{}, error) {
		return struct{}{}, fn(ctx, tx)
	})
	return err
}

// SQLTxValue is [Runner.SQLTx] for a function that returns a value.
func SQLTxValue[T any](ctx context.Context, x *Runner, db SQLBeginner, opts *sql.TxOptions, fn func(ctx context.Context, tx *sql.Tx) (T, error)) (T, error) {
	if x == nil || isNil(db) || fn == nil {
		var zero T
		return zero, badInput(x, isNil(db), "fn is nil")
	}
	c := &call[*sql.Tx, T]{x: x, fn: fn, driver: sqlDriver{db: db, opts: opts}}
	return c.run(ctx)
}

// badInput names what is missing from a call.
func badInput(x *Runner, nilDB bool, otherwise string) error {
	switch {
	case x == nil:
		return fmt.Errorf("%w: retrypgx: the *Runner is nil; build one with New", retry.ErrInvalidOption)
	case nilDB:
		return fmt.Errorf("%w: retrypgx: the database is nil", retry.ErrInvalidOption)
	}
	return fmt.Errorf("%w: retrypgx: %s", retry.ErrInvalidOption, otherwise)
}

// txDriver is what a call needs of a database package's transactions.
type txDriver[Tx any] interface {
	begin(ctx context.Context) (Tx, error)
	exec(ctx context.Context, tx Tx, sql string) error
	commit(ctx context.Context, tx Tx) error
	rollback(ctx context.Context, tx Tx)
}

// call is one call of Tx: its attempts share it.
type call[Tx, T any] struct {
	x      *Runner
	fn     func(context.Context, Tx) (T, error)
	driver txDriver[Tx]
	// tx is the transaction kept between attempts with CockroachRestart.
	tx    Tx
	hasTx bool
	ended error // a commitUnknown once an attempt ended with one
}

func (c *call[Tx, T]) run(ctx context.Context) (T, error) {
	if ctx == nil {
		var zero T
		return zero, fmt.Errorf("%w: retrypgx: the context is nil; use context.Background()", retry.ErrInvalidOption)
	}
	defer func() {
		if c.hasTx {
			// CockroachRestart: the Retrier stopped, or fn panicked,
			// with the transaction open.
			c.driver.rollback(context.WithoutCancel(ctx), c.tx)
		}
	}()
	return retry.DoValueOn(ctx, c.x.r, c.attempt)
}

// attempt runs fn once in a transaction and commits it.
func (c *call[Tx, T]) attempt(ctx context.Context) (v T, err error) {
	var zero T
	if c.ended != nil {
		// Only a Retrier with OverloadOptions.NestedRetries calls again after an
		// unknown outcome; the transaction must not run twice.
		return zero, retry.Permanent(c.ended)
	}
	tx, err := c.open(ctx)
	if err != nil {
		return zero, c.verdict(err, BeforeCommit)
	}
	ended := false // by COMMIT, or kept for the next attempt
	defer func() {
		if !ended && !c.hasTx {
			c.driver.rollback(ctx, tx)
		}
	}()
	if v, err = c.fn(ctx, tx); err != nil {
		return zero, c.failed(err, BeforeCommit)
	}
	if c.x.savepoint {
		if err := c.driver.exec(ctx, tx, "RELEASE SAVEPOINT cockroach_restart"); err != nil {
			return zero, c.failed(err, AtCommit)
		}
	}
	c.hasTx = false
	err = c.driver.commit(ctx, tx)
	ended = true // COMMIT ends the transaction, whatever it answers
	if err != nil {
		return zero, c.verdict(err, AtCommit)
	}
	return v, nil
}

// open begins the attempt's transaction, or with CockroachRestart goes
// back to the savepoint of the one kept from the attempt before.
func (c *call[Tx, T]) open(ctx context.Context) (Tx, error) {
	if c.hasTx {
		err := c.driver.exec(ctx, c.tx, "ROLLBACK TO SAVEPOINT cockroach_restart")
		if err == nil {
			return c.tx, nil
		}
		c.hasTx = false
		c.driver.rollback(ctx, c.tx)
		var zero Tx
		return zero, err
	}
	tx, err := c.driver.begin(ctx)
	if err != nil || !c.x.savepoint {
		return tx, err
	}
	if err := c.driver.exec(ctx, tx, "SAVEPOINT cockroach_restart"); err != nil {
		c.driver.rollback(ctx, tx)
		var zero Tx
		return zero, err
	}
	c.tx, c.hasTx = tx, true
	return tx, nil
}

// failed classifies an error of fn or of RELEASE SAVEPOINT. With
// CockroachRestart the transaction is kept for the next attempt only when
// the savepoint can undo the error: a retryable answer on a live
// connection; otherwise the attempt's end rolls it back.
func (c *call[Tx, T]) failed(err error, stage Stage) error {
	if c.hasTx && (c.x.Classify(err, stage) != Retryable || sqlState(err) == "" || connectionCode(sqlState(err))) {
		c.hasTx = false
	}
	return c.verdict(err, stage)
}

// verdict turns err into what the Retrier acts on: unmarked to retry (a
// context's end too: the Retrier knows what to make of it), marked
// Permanent, or a commitUnknown that ends the call with OutcomeUnknown.
func (c *call[Tx, T]) verdict(err error, stage Stage) error {
	if retryGaveUp(err) {
		return err // a Retrier inside fn gave up: the Retrier's rules
	}
	switch c.x.Classify(err, stage) {
	case Retryable:
		return err
	case Unknown:
		u := newCommitUnknown(err)
		c.ended = u
		return u
	}
	return retry.Permanent(err)
}

// isNil says whether v is nil or holds a nil pointer.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

// pgxDriver runs transactions on pgx.
type pgxDriver struct {
	db   Beginner
	opts pgx.TxOptions
}

func (d pgxDriver) begin(ctx context.Context) (pgx.Tx, error) { return d.db.BeginTx(ctx, d.opts) }
func (d pgxDriver) exec(ctx context.Context, tx pgx.Tx, q string) error {
	_, err := tx.Exec(ctx, q)
	return err
}
func (d pgxDriver) commit(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }
func (d pgxDriver) rollback(ctx context.Context, tx pgx.Tx)     { _ = tx.Rollback(ctx) }

// sqlDriver runs transactions on database/sql.
type sqlDriver struct {
	db   SQLBeginner
	opts *sql.TxOptions
}

func (d sqlDriver) begin(ctx context.Context) (*sql.Tx, error) { return d.db.BeginTx(ctx, d.opts) }
func (d sqlDriver) exec(ctx context.Context, tx *sql.Tx, q string) error {
	_, err := tx.ExecContext(ctx, q)
	return err
}
func (d sqlDriver) commit(_ context.Context, tx *sql.Tx) error { return tx.Commit() }
func (d sqlDriver) rollback(_ context.Context, tx *sql.Tx)     { _ = tx.Rollback() }
