package pgstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/steadfast-go/retry/pgstore/pgschema/pgschematest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMigrateSerializesEverySpelling migrates one table spelled "t" and
// "public.t" at once, while another transaction holds an uncommitted
// CREATE TABLE of it, the moment concurrent CREATE … IF NOT EXISTS fail
// at. The first Migrate waits for that transaction; the second must wait
// for the first's advisory lock, not beside it for the same transaction,
// or one of them fails with duplicate key value violates unique
// constraint "pg_type_typname_nsp_index" once it ends. The lock key was
// the table name as spelled, so the two did not wait for each other.
func TestMigrateSerializesEverySpelling(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	table := tableName(t)
	dropTable(t, pool, table)
	var schema string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema))
	url, _ := testURL()
	migrating := pgschematest.AppPool(t, url, table)
	plain, err := pgstore.New(migrating, &pgstore.Options{Table: table})
	require.NoError(t, err)
	qualified, err := pgstore.New(migrating, &pgstore.Options{Table: schema + "." + table})
	require.NoError(t, err)

	hold, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = hold.Rollback(ctx) }()
	_, err = hold.Exec(ctx, "CREATE TABLE "+pgx.Identifier{table}.Sanitize()+" (x int)")
	require.NoError(t, err)

	errs := make(chan error, 2)
	go func() { errs <- plain.Migrate(ctx) }()
	go func() { errs <- qualified.Migrate(ctx) }()
	assert.Equal(t, []string{"advisory", "transactionid"}, pgschematest.LockWaits(t, pool, table, 2),
		"one Migrate waits for the uncommitted CREATE, the other for the first's lock")
	require.NoError(t, hold.Rollback(ctx))
	for range 2 {
		assert.NoError(t, <-errs)
	}
	c, err := qualified.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimAcquired, c.Status)
	held, err := plain.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimHeld, held.Status, "both spellings are one table")
}

// TestMigrateConcurrentSpellings races Migrates of both spellings of
// fresh tables: none fails.
func TestMigrateConcurrentSpellings(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	var schema string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema))
	for range 8 {
		table := tableName(t)
		dropTable(t, pool, table)
		var wg sync.WaitGroup
		for _, name := range []string{table, schema + "." + table, table, schema + "." + table} {
			s, err := pgstore.New(pool, &pgstore.Options{Table: name})
			require.NoError(t, err)
			wg.Go(func() { assert.NoError(t, s.Migrate(ctx), name) })
		}
		wg.Wait()
	}
}
