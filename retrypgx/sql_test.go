package retrypgx_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/steadfast-go/retry/retrypgx"
)

func sqlDB(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(4)
	t.Cleanup(func() { db.Close() })
	return db
}

// database/sql goes through the same classification: a conflict runs the
// transaction again, options pass through, and a COMMIT cut off is an
// unknown outcome.
func TestSQLTx(t *testing.T) {
	p, cut := newCutDB(t)
	url, _ := pgdltest.URL()
	db := sqlDB(t, url)
	x := runner(t, nil)
	ctx := context.Background()

	runs := 0
	v, err := retrypgx.SQLTxValue(ctx, x, db, &sql.TxOptions{Isolation: sql.LevelSerializable, ReadOnly: true},
		func(ctx context.Context, tx *sql.Tx) (string, error) {
			runs++
			if runs == 1 {
				_, err := tx.ExecContext(ctx, `DO $$ BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = '40001'; END $$`)
				return "", err
			}
			var iso, ro string
			err := tx.QueryRowContext(ctx, "SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')").Scan(&iso, &ro)
			return iso + "/" + ro, err
		})
	if err != nil || runs != 2 || v != "serializable/on" {
		t.Fatalf("SQLTxValue = %q, %v after %d runs; want serializable/on after 2", v, err, runs)
	}

	err = x.SQLTx(ctx, db, nil, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "SELECT 1 FROM no_such_table")
		return err
	})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42P01" || !retry.IsPermanent(err) {
		t.Fatalf("undefined table: %v; want a permanent 42P01", err)
	}

	proxied := sqlDB(t, proxyURL(p))
	p.armed.Store(true)
	runs = 0
	err = x.SQLTx(ctx, proxied, nil, func(ctx context.Context, tx *sql.Tx) error {
		runs++
		_, err := tx.ExecContext(ctx, "INSERT INTO "+cut.table+" VALUES ('s1')")
		return err
	})
	if !errors.Is(err, retrypgx.ErrCommitOutcomeUnknown) || runs != 1 {
		t.Fatalf("a COMMIT cut off: %v after %d runs; want an unknown outcome after 1", err, runs)
	}
	if n := count(t, cut.direct, "SELECT count(*) FROM "+cut.table); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}
