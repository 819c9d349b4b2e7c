// Package pgdltest connects the tests of pgdeadletter and of the
// deadletters command to a real PostgreSQL server and gives each test a
// table of its own; StartServer gives a test a whole server of its own,
// to kill and restart.
package pgdltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry/pgdeadletter"
)

// EnvURL names the variable that holds the server's URL.
const EnvURL = "RETRY_TEST_POSTGRES_URL"

// DefaultURL is the server used when EnvURL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the test server's URL and whether EnvURL chose it.
func URL() (string, bool) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, true
	}
	return DefaultURL, false
}

// Pool returns a pool connected to the test server, closed when the test
// ends. When no server answers, the test is skipped with a note on how to
// run it, unless EnvURL is set or CI=true: then it fails.
func Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	url, set := URL()
	return poolAt(tb, url, set)
}

// poolAt is Pool for the server at url; set says whether the user chose
// it.
func poolAt(tb testing.TB, url string, set bool) *pgxpool.Pool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err == nil {
		if err = pool.Ping(ctx); err != nil {
			pool.Close()
		}
	}
	if err != nil {
		if set || os.Getenv("CI") == "true" {
			tb.Fatalf("PostgreSQL at %s: %v", url, err)
		}
		tb.Skipf("no PostgreSQL at %s (%v): start one there, or set %s=postgres://… to run this test", url, err, EnvURL)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// Table returns a new table name, unique to this test, and drops the
// table when the test ends.
func Table(tb testing.TB, pool *pgxpool.Pool) string {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "dl_test_" + hex.EncodeToString(b[:])
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+name); err != nil {
			tb.Errorf("dropping test table %s: %v", name, err)
		}
	})
	return name
}

// Sink returns a migrated sink on a table of Table, with pool.
func Sink(tb testing.TB, pool *pgxpool.Pool) *pgdeadletter.Sink {
	tb.Helper()
	s, err := pgdeadletter.New(pool, &pgdeadletter.Options{Table: Table(tb, pool)})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	return s
}
