package retrypgx_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/steadfast-go/retry/retrypgx"
)

// statements records the SQL a pool sends that names the savepoint or
// ends a transaction.
type statements struct {
	mu  sync.Mutex
	sql []string
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	q := strings.ToLower(d.SQL)
	if strings.Contains(q, "cockroach_restart") || q == "commit" || q == "rollback" || strings.HasPrefix(q, "begin") {
		s.mu.Lock()
		s.sql = append(s.sql, q)
		s.mu.Unlock()
	}
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statements) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sql)
}

// tracedPool is a pool to the shared server whose statements are recorded.
func tracedPool(t *testing.T) (*pgxpool.Pool, *statements) {
	t.Helper()
	sharedPool(t) // skips without a server
	url, _ := pgdltest.URL()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	st := &statements{}
	cfg.ConnConfig.Tracer = st
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, st
}

// With CockroachRestart a retry goes back to the savepoint in the same
// transaction (the same txid), as CockroachDB's protocol asks, and the
// savepoint is released before COMMIT. Checked on PostgreSQL under READ
// COMMITTED, where a raised 40001 leaves the transaction usable.
func TestCockroachRestartProtocol(t *testing.T) {
	pool, st := tracedPool(t)
	tbl := table(t, pool)
	exec(t, pool, "CREATE TABLE "+tbl+" (attempt int)")
	x := runner(t, &retrypgx.Options{CockroachRestart: true})
	var txids []int64
	err := x.Tx(context.Background(), pool, pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		var id int64
		if err := tx.QueryRow(ctx, "SELECT txid_current()").Scan(&id); err != nil {
			return err
		}
		txids = append(txids, id)
		if _, err := tx.Exec(ctx, "INSERT INTO "+tbl+" VALUES ($1)", len(txids)); err != nil {
			return err
		}
		if len(txids) == 1 {
			return raise(ctx, tx, "40001")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(txids) != 2 || txids[0] != txids[1] {
		t.Fatalf("txids %v; want two attempts in one transaction", txids)
	}
	want := []string{"begin", "savepoint cockroach_restart", "rollback to savepoint cockroach_restart", "release savepoint cockroach_restart", "commit"}
	if got := st.list(); !slices.Equal(got, want) {
		t.Fatalf("statements %q, want %q", got, want)
	}
	if n := count(t, pool, "SELECT count(*) FROM "+tbl+" WHERE attempt = 2"); n != 1 || count(t, pool, "SELECT count(*) FROM "+tbl) != 1 {
		t.Fatal("want the second attempt's row only: the savepoint undoes the first's")
	}
}

// Without CockroachRestart each attempt is a transaction of its own.
func TestRetryIsNewTransaction(t *testing.T) {
	pool, st := tracedPool(t)
	x := runner(t, nil)
	var txids []int64
	err := x.Tx(context.Background(), pool, pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		var id int64
		if err := tx.QueryRow(ctx, "SELECT txid_current()").Scan(&id); err != nil {
			return err
		}
		if txids = append(txids, id); len(txids) == 1 {
			return raise(ctx, tx, "40001")
		}
		return nil
	})
	if err != nil || len(txids) != 2 || txids[0] == txids[1] {
		t.Fatalf("err %v, txids %v; want two transactions", err, txids)
	}
	if got, want := st.list(), []string{"begin", "rollback", "begin", "commit"}; !slices.Equal(got, want) {
		t.Fatalf("statements %q, want %q", got, want)
	}
}

// With CockroachRestart a call that ends, for good or out of attempts,
// or with a lost connection, leaves no transaction open and no
// connection held.
func TestCockroachRestartEnds(t *testing.T) {
	pool, st := tracedPool(t)
	x := runner(t, &retrypgx.Options{CockroachRestart: true}, retry.WithMaxAttempts(3))
	ctx := context.Background()
	errOwn := errors.New("own")
	runs := 0
	err := x.Tx(ctx, pool, pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error { runs++; return errOwn })
	if !errors.Is(err, errOwn) || runs != 1 {
		t.Fatalf("a permanent error: %v after %d runs", err, runs)
	}
	runs = 0
	err = x.Tx(ctx, pool, pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error { runs++; return raise(ctx, tx, "40001") })
	if !errors.Is(err, retry.ErrExhausted) || runs != 3 {
		t.Fatalf("exhausted: %v after %d runs", err, runs)
	}
	want := []string{"begin", "savepoint cockroach_restart", "rollback to savepoint cockroach_restart", "rollback to savepoint cockroach_restart", "rollback"}
	if got := st.list(); !slices.Equal(got[len(got)-len(want):], want) {
		t.Fatalf("exhausted: statements %q, want them to end with %q", got, want)
	}
	var txids []int64
	err = x.Tx(ctx, pool, pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		var id int64
		if err := tx.QueryRow(ctx, "SELECT txid_current()").Scan(&id); err != nil {
			return err
		}
		if txids = append(txids, id); len(txids) == 1 {
			_, err := tx.Exec(ctx, "SELECT pg_terminate_backend(pg_backend_pid())")
			return err
		}
		return nil
	})
	if err != nil || len(txids) != 2 || txids[0] == txids[1] {
		t.Fatalf("a lost connection: %v, txids %v; want a new transaction", err, txids)
	}
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Fatalf("%d connections still held", n)
	}
}
