package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

const defaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		// A child process runs one test and is killed or exits; leak
		// checks belong to the parent.
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m)
}

// testURL returns RETRY_TEST_POSTGRES_URL, or the local default.
func testURL() (url string, explicit bool) {
	if u := os.Getenv("RETRY_TEST_POSTGRES_URL"); u != "" {
		return u, true
	}
	return defaultURL, false
}

// newPool connects to the test server. Without one it skips, unless the
// URL was given or CI=true, where a missing server is a failure.
func newPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	return newPoolWith(tb, func(*pgxpool.Config) {})
}

// newPoolWith is newPool with configure applied to the pool's settings
// before it connects.
func newPoolWith(tb testing.TB, configure func(*pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	url, explicit := testURL()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(tb, err, "RETRY_TEST_POSTGRES_URL")
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	cfg.MaxConns = 16 // the concurrent tests run 64 callers
	if os.Getenv(childEnv) != "" {
		cfg.MaxConns = 4 // several children share max_connections
	}
	configure(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
		if err != nil {
			pool.Close()
		}
	}
	if err != nil {
		msg := "PostgreSQL at " + url + " does not answer (" + err.Error() + "); start one " +
			"(database test, user postgres, trust auth) or set RETRY_TEST_POSTGRES_URL"
		if explicit || os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// tableName returns a table name no other test or test run uses.
func tableName(tb testing.TB) string {
	var b [6]byte
	_, err := rand.Read(b[:])
	require.NoError(tb, err)
	name := strings.ToLower(tb.Name())
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
	name = strings.TrimPrefix(name, "test")
	if len(name) > 20 {
		name = name[:20]
	}
	return "pgstore_t" + name + "_" + hex.EncodeToString(b[:])
}

// dropTable drops table when the test ends.
func dropTable(tb testing.TB, pool *pgxpool.Pool, table string) {
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize())
		require.NoError(tb, err)
	})
}

// newStore returns a migrated store on a fresh table, dropped at the end,
// with opts (which may be nil) but for the table.
func newStore(tb testing.TB, opts *pgstore.Options) (*pgstore.Store, *pgxpool.Pool, string) {
	tb.Helper()
	pool := newPool(tb)
	table := tableName(tb)
	store, err := pgstore.New(pool, withTable(opts, table))
	require.NoError(tb, err)
	dropTable(tb, pool, table)
	require.NoError(tb, store.Migrate(context.Background()))
	return store, pool, table
}

// childEnv, when set, tells the test binary it runs as a child process of
// a cross-process test.
const childEnv = "PGSTORE_TEST_CHILD"

// downPool returns a pool whose server never answers: port 1 refuses
// connections, and the connect timeout is short.
func downPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig("postgres://postgres@127.0.0.1:1/test?sslmode=disable")
	require.NoError(tb, err)
	cfg.ConnConfig.ConnectTimeout = 200 * time.Millisecond
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(tb, err)
	tb.Cleanup(pool.Close)
	return pool
}

// withTable returns a copy of opts (which may be nil) with table set.
func withTable(opts *pgstore.Options, table string) *pgstore.Options {
	o := pgstore.Options{}
	if opts != nil {
		o = *opts
	}
	o.Table = table
	return &o
}
