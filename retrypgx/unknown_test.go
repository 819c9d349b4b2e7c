package retrypgx_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/steadfast-go/retry/retrypgx"
)

// cutDB is a table on the shared server, reached directly and through a
// commitCutter.
type cutDB struct {
	direct, proxied *pgxpool.Pool
	table           string
}

func newCutDB(t *testing.T) (*commitCutter, cutDB) {
	t.Helper()
	direct := sharedPool(t)
	tbl := table(t, direct)
	exec(t, direct, "CREATE TABLE "+tbl+" (id text)")
	url, _ := pgdltest.URL()
	p, proxied := newCommitCutter(t, url)
	return p, cutDB{direct: direct, proxied: poolTo(t, proxied, 4), table: tbl}
}

// insertRow is a transaction that inserts row 't1' into tbl and counts
// its runs.
func insertRow(tbl string, runs *int) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		*runs++
		_, err := tx.Exec(ctx, "INSERT INTO "+tbl+" VALUES ('t1')")
		return err
	}
}

// A connection lost while COMMIT was in flight, after the server
// committed, ends the call with an unknown outcome: not retried, the row
// there exactly once.
func TestCommitLostIsUnknown(t *testing.T) {
	p, db := newCutDB(t)
	direct := db.direct
	x := runner(t, nil)
	p.armed.Store(true)
	runs := 0
	err := x.Tx(context.Background(), db.proxied, pgx.TxOptions{}, insertRow(db.table, &runs))
	if p.cut.Load() != 1 {
		t.Fatalf("the proxy cut %d COMMITs, want 1", p.cut.Load())
	}
	if !errors.Is(err, retry.ErrOutcomeUnknown) || !errors.Is(err, retrypgx.ErrCommitOutcomeUnknown) {
		t.Fatalf("err = %v; want one matching retry.ErrOutcomeUnknown and retrypgx.ErrCommitOutcomeUnknown", err)
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Outcome != retry.OutcomeUnknown || re.Attempts != 1 || runs != 1 {
		t.Fatalf("err = %v after %d runs; want OutcomeUnknown after 1 attempt", err, runs)
	}
	if n := count(t, direct, "SELECT count(*) FROM "+db.table+" WHERE id = 't1'"); n != 1 {
		t.Fatalf("%d rows, want the one COMMIT wrote", n)
	}
}

// COMMIT answered by the end of the session (the server terminated it
// while a deferred trigger ran): the transaction did not commit, but
// nothing the client sees says so, and the call ends unknown, not
// retried.
func TestCommitFatalIsUnknown(t *testing.T) {
	pool := sharedPool(t)
	tbl := table(t, pool)
	exec(t, pool, "CREATE TABLE "+tbl+" (id text)")
	exec(t, pool, `CREATE FUNCTION `+tbl+`_die() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(1); RETURN NULL; END $$`)
	t.Cleanup(func() { exec(t, pool, "DROP FUNCTION IF EXISTS "+tbl+"_die() CASCADE") })
	exec(t, pool, `CREATE CONSTRAINT TRIGGER die AFTER INSERT ON `+tbl+` DEFERRABLE INITIALLY DEFERRED
		FOR EACH ROW EXECUTE FUNCTION `+tbl+`_die()`)
	x := runner(t, nil)
	runs := 0
	err := x.Tx(context.Background(), pool, pgx.TxOptions{}, insertRow(tbl, &runs))
	var pe *pgconn.PgError
	if !errors.Is(err, retrypgx.ErrCommitOutcomeUnknown) || !errors.As(err, &pe) || pe.Code != "57P01" || runs != 1 {
		t.Fatalf("err = %v after %d runs; want an unknown outcome from 57P01 after 1", err, runs)
	}
	if n := count(t, pool, "SELECT count(*) FROM "+tbl); n != 0 {
		t.Fatalf("%d rows; the terminated COMMIT wrote none", n)
	}
}

// With an idempotency key, WithIdempotency's rules for an unknown outcome
// apply: by default it is stored and replayed, so a second call with the
// key does not run the transaction again.
func TestCommitLostWithIdempotencyKey(t *testing.T) {
	p, db := newCutDB(t)
	direct := db.direct
	x := runner(t, nil, retry.WithIdempotency(memstore.New(nil), nil))
	ctx := retry.ContextWithIdempotencyKey(context.Background(), "transfer:t1")
	runs := 0
	fn := insertRow(db.table, &runs)
	p.armed.Store(true)
	first := x.Tx(ctx, db.proxied, pgx.TxOptions{}, fn)
	second := x.Tx(ctx, db.proxied, pgx.TxOptions{}, fn)
	if !errors.Is(first, retrypgx.ErrCommitOutcomeUnknown) {
		t.Fatalf("first call: %v; want an unknown COMMIT", first)
	}
	if !errors.Is(second, retry.ErrOutcomeUnknown) || !errors.Is(second, retry.ErrReplayed) || runs != 1 {
		t.Fatalf("second call: %v after %d runs in all; want the unknown outcome replayed, fn run once", second, runs)
	}
	if n := count(t, direct, "SELECT count(*) FROM "+db.table); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

// The pattern of the package doc: an idempotency row written in the same
// transaction makes running an unknown outcome again safe. The second run
// finds the row and does nothing.
func TestIdempotencyRowMakesRerunSafe(t *testing.T) {
	p, db := newCutDB(t)
	direct := db.direct
	keys := table(t, direct)
	exec(t, direct, "CREATE TABLE "+keys+" (key text PRIMARY KEY)")
	x := runner(t, nil)
	runs := 0
	transfer := func(ctx context.Context, tx pgx.Tx) error {
		runs++
		tag, err := tx.Exec(ctx, "INSERT INTO "+keys+" VALUES ($1) ON CONFLICT DO NOTHING", "transfer:t1")
		if err != nil || tag.RowsAffected() == 0 {
			return err // done before: nothing to do
		}
		_, err = tx.Exec(ctx, "INSERT INTO "+db.table+" VALUES ('t1')")
		return err
	}
	p.armed.Store(true)
	err := x.Tx(context.Background(), db.proxied, pgx.TxOptions{}, transfer)
	if !errors.Is(err, retry.ErrOutcomeUnknown) {
		t.Fatalf("first call: %v; want an unknown outcome", err)
	}
	if err := x.Tx(context.Background(), db.proxied, pgx.TxOptions{}, transfer); err != nil {
		t.Fatalf("running it again: %v", err)
	}
	if n := count(t, direct, "SELECT count(*) FROM "+db.table); n != 1 || runs != 2 {
		t.Fatalf("%d rows after %d runs; want 1 after 2", n, runs)
	}
}

// A Retrier with OverloadOptions.NestedRetries would retry an inner unknown outcome;
// the Runner refuses to run the transaction again and ends the call.
func TestCommitLostWithNestedRetries(t *testing.T) {
	p, db := newCutDB(t)
	direct := db.direct
	x := runner(t, nil, retry.WithOverload(&retry.OverloadOptions{NestedRetries: true}))
	p.armed.Store(true)
	runs := 0
	err := x.Tx(context.Background(), db.proxied, pgx.TxOptions{}, insertRow(db.table, &runs))
	if !errors.Is(err, retry.ErrOutcomeUnknown) || !errors.Is(err, retrypgx.ErrCommitOutcomeUnknown) || runs != 1 {
		t.Fatalf("err = %v after %d runs; want an unknown outcome after 1 run", err, runs)
	}
	if n := count(t, direct, "SELECT count(*) FROM "+db.table); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}
