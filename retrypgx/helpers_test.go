package retrypgx_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/steadfast-go/retry/retrypgx"
)

// sharedPool connects to the shared test server (see pgdltest.Pool), with
// few connections: other tests use it too.
func sharedPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return pgdltest.Pool(t)
}

// ownPool starts a server of the test's own and connects to it with up to
// maxConns connections.
func ownPool(t testing.TB, maxConns int32) (*pgdltest.Server, *pgxpool.Pool) {
	t.Helper()
	srv := pgdltest.StartServer(t)
	pool := poolTo(t, srv.URL(), maxConns)
	// Transfers in opposite directions deadlock; the default second
	// before PostgreSQL looks would make the tests slow, not surer.
	exec(t, pool, "ALTER SYSTEM SET deadlock_timeout = '20ms'")
	exec(t, pool, "SELECT pg_reload_conf()")
	return srv, pool
}

func poolTo(t testing.TB, url string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// table returns a table name of the test's own on pool, dropped at its end.
func table(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	return pgdltest.Table(t, pool)
}

// exec runs statements on pool or fails the test.
func exec(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// count returns the result of a count query.
func count(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// runner builds a Runner on a Retrier of quick waits and no budget, with
// more options.
func runner(t testing.TB, opts *retrypgx.Options, more ...retry.Option) *retrypgx.Runner {
	t.Helper()
	base := []retry.Option{
		retry.WithMaxAttempts(5),
		retry.WithBackoff(retry.Constant(time.Millisecond)),
		retry.WithOverload(&retry.OverloadOptions{NoBudget: true}),
	}
	r, err := retry.New(append(base, more...)...)
	if err != nil {
		t.Fatal(err)
	}
	x, err := retrypgx.New(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// pgErr is an error answer of the server with code.
func pgErr(code, severity string) error {
	return &pgconn.PgError{Severity: severity, SeverityUnlocalized: severity, Code: code, Message: "test"}
}
