package pgdeadletter_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/pgdeadletter"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// appPool is a pool whose sessions carry application_name app, so that
// the test can find them in pg_stat_activity.
func appPool(t *testing.T, app string) *pgxpool.Pool {
	t.Helper()
	pgdltest.Pool(t) // skips without a server
	url, _ := pgdltest.URL()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// lockWaits polls until n sessions of app wait for a lock, and returns
// what each waits for (pg_stat_activity.wait_event), sorted.
func lockWaits(t *testing.T, pool *pgxpool.Pool, app string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows, err := pool.Query(context.Background(),
			"SELECT wait_event FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock' ORDER BY 1", app)
		require.NoError(t, err)
		waits, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		if len(waits) >= n {
			return waits
		}
		require.True(t, time.Now().Before(deadline), "%d sessions wait for a lock after 10s, want %d: %v", len(waits), n, waits)
		time.Sleep(time.Millisecond)
	}
}

// TestMigrateSerializesEverySpelling migrates one table spelled "t" and
// "public.t" at once, while another transaction holds an uncommitted
// CREATE TABLE of it, the moment concurrent CREATE … IF NOT EXISTS fail
// at. The first Migrate waits for that transaction; the second must wait
// for the first's advisory lock, not beside it for the same transaction,
// or one of them fails with duplicate key value violates unique
// constraint "pg_type_typname_nsp_index" once it ends. The lock key was
// the table name as spelled, so the two did not wait for each other.
func TestMigrateSerializesEverySpelling(t *testing.T) {
	pool := pgdltest.Pool(t)
	ctx := t.Context()
	table := pgdltest.Table(t, pool)
	var schema string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema))
	migrating := appPool(t, table)
	plain, err := pgdeadletter.New(migrating, pgdeadletter.WithTable(table))
	require.NoError(t, err)
	qualified, err := pgdeadletter.New(migrating, pgdeadletter.WithTable(schema+"."+table))
	require.NoError(t, err)

	hold, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = hold.Rollback(context.Background()) }()
	_, err = hold.Exec(ctx, "CREATE TABLE "+pgx.Identifier{table}.Sanitize()+" (x int)")
	require.NoError(t, err)

	errs := make(chan error, 2)
	go func() { errs <- plain.Migrate(ctx) }()
	go func() { errs <- qualified.Migrate(ctx) }()
	assert.Equal(t, []string{"advisory", "transactionid"}, lockWaits(t, pool, table, 2),
		"one Migrate waits for the uncommitted CREATE, the other for the first's lock")
	require.NoError(t, hold.Rollback(ctx))
	for range 2 {
		assert.NoError(t, <-errs)
	}
	require.NoError(t, qualified.Put(ctx, record("m", "op", retry.OutcomeExhausted, time.Now())))
	recs, err := plain.List(ctx, deadletter.Filter{})
	require.NoError(t, err)
	assert.Equal(t, []string{"m"}, ids(recs), "both spellings are one table")
}

// TestMigrateConcurrentSpellings races Migrates of both spellings of
// fresh tables: none fails.
func TestMigrateConcurrentSpellings(t *testing.T) {
	pool := pgdltest.Pool(t)
	ctx := t.Context()
	var schema string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema))
	for range 8 {
		table := pgdltest.Table(t, pool)
		var wg sync.WaitGroup
		for _, name := range []string{table, schema + "." + table, table, schema + "." + table} {
			s, err := pgdeadletter.New(pool, pgdeadletter.WithTable(name))
			require.NoError(t, err)
			wg.Go(func() { assert.NoError(t, s.Migrate(ctx), name) })
		}
		wg.Wait()
	}
}
