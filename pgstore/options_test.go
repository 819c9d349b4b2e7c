package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/steadfast-go/retry/pgstore/pgschema"
	"github.com/steadfast-go/retry/pgstore/pgschema/pgschematest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewRejectsBadInput(t *testing.T) {
	pool := downPool(t) // New does not connect
	tests := []struct {
		name string
		pool *pgxpool.Pool
		opts *pgstore.Options
		want string
	}{
		{"nil pool", nil, nil, "pool is nil"},
		{"nil pool with options", nil, &pgstore.Options{Table: "idem"}, "pool is nil"},
		{"nil clock pointer", pool, &pgstore.Options{Clock: (*clock.Mock)(nil)}, "Options.Clock (*clock.Mock)(nil) is a nil pointer"},
		{"empty table", pool, &pgstore.Options{Table: "app."}, "table name is empty"},
		{"injection", pool, &pgstore.Options{Table: "x; DROP TABLE users"}, "must be a lower-case letter"},
		{"quote", pool, &pgstore.Options{Table: `x"y`}, "must be a lower-case letter"},
		{"upper case", pool, &pgstore.Options{Table: "Idem"}, "lower-case"},
		{"leading digit", pool, &pgstore.Options{Table: "1idem"}, "must be a lower-case letter"},
		{"empty schema", pool, &pgstore.Options{Table: ".idem"}, "schema name is empty"},
		{"two dots", pool, &pgstore.Options{Table: "a.b.c"}, "table name must be"},
		{"too long", pool, &pgstore.Options{Table: strings.Repeat("a", pgstore.MaxTableName+1)}, "at most 48"},
		{"schema too long", pool, &pgstore.Options{Table: strings.Repeat("s", 64) + ".t"}, "schema name is 64 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, err := pgstore.New(tt.pool, tt.opts)
			assert.Nil(t, store)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.ErrorContains(t, err, tt.want)
			if tt.pool != nil {
				assert.ErrorContains(t, err, "Options.", "the error names the field")
			}
		})
	}
}

// TestNewWithNilOptions: a nil *Options and the zero Options both give
// the default table and the server's clock.
func TestNewWithNilOptions(t *testing.T) {
	pool := downPool(t)
	for name, opts := range map[string]*pgstore.Options{"nil": nil, "zero": {}} {
		store, err := pgstore.New(pool, opts)
		require.NoError(t, err, name)
		assert.Equal(t, `"retry_idempotency"`, store.Table(), name)
		assert.Equal(t, `"`+pgstore.DefaultTable+`"`, store.Table(), name)
	}
	// The caller's Options are read, not kept or changed.
	opts := &pgstore.Options{Table: "a"}
	store, err := pgstore.New(pool, opts)
	require.NoError(t, err)
	opts.Table = "b"
	assert.Equal(t, `"a"`, store.Table())
}

// TestTableNameRule runs the names that pgdeadletter's tests run too
// (pgschematest.TestTableNames there). Options.Table "" means
// DefaultTable, so the one name of the rule's that cannot reach it here is
// the empty one, which gives the default table instead.
func TestTableNameRule(t *testing.T) {
	pool := downPool(t)
	for _, name := range pgschematest.Valid() {
		_, err := pgstore.New(pool, &pgstore.Options{Table: name})
		assert.NoError(t, err, "table name %q", name)
	}
	for _, name := range pgschematest.Invalid() {
		store, err := pgstore.New(pool, &pgstore.Options{Table: name})
		if name == "" {
			require.NoError(t, err)
			assert.Equal(t, `"`+pgstore.DefaultTable+`"`, store.Table())
			continue
		}
		assert.ErrorIs(t, err, retry.ErrInvalidOption, "table name %q", name)
		assert.ErrorContains(t, err, "Options.Table", "table name %q", name)
	}
}

func TestTableNames(t *testing.T) {
	pool := downPool(t)
	for name, want := range map[string]string{
		"":                      `"retry_idempotency"`,
		"billing_idem":          `"billing_idem"`,
		"_x9":                   `"_x9"`,
		"app.idem":              `"app"."idem"`,
		strings.Repeat("a", 48): `"` + strings.Repeat("a", 48) + `"`,
	} {
		store, err := pgstore.New(pool, &pgstore.Options{Table: name})
		require.NoError(t, err, name)
		assert.Equal(t, want, store.Table(), name)
		assert.Contains(t, store.Schema(), "CREATE TABLE IF NOT EXISTS "+want+" (", name)
	}
	store, err := pgstore.New(pool, &pgstore.Options{Table: "app.idem"})
	require.NoError(t, err)
	assert.Contains(t, store.Schema(), `CREATE INDEX IF NOT EXISTS "idem_expires_at_idx" ON "app"."idem" (expires_at);`)
	// The longest table name leaves room for the index name's suffix.
	assert.Equal(t, pgschema.MaxTableName, pgstore.MaxTableName)
	long := strings.Repeat("a", pgstore.MaxTableName)
	store, err = pgstore.New(pool, &pgstore.Options{Table: long})
	require.NoError(t, err)
	index := long + "_expires_at_idx"
	assert.Len(t, index, 63)
	assert.Contains(t, store.Schema(), `CREATE INDEX IF NOT EXISTS "`+index+`"`)
	assert.NotContains(t, store.Schema(), "{{")
}

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	pool := newPool(t)
	table := tableName(t)
	dropTable(t, pool, table)
	store, err := pgstore.New(pool, &pgstore.Options{Table: table})
	require.NoError(t, err)
	ctx := context.Background()

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { assert.NoError(t, store.Migrate(ctx)) })
	}
	wg.Wait()
	c, err := store.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, c.Status)
	require.NoError(t, store.Migrate(ctx))
	held, err := store.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimHeld, held.Status, "migrating again keeps the rows")

	var indexes int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_indexes WHERE tablename = $1", table).Scan(&indexes))
	assert.Equal(t, 2, indexes, "primary key and expiry index")
}

// TestSchemaNamespacing keeps two stores with the same table name apart
// by schema.
func TestSchemaNamespacing(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	schema := tableName(t)
	_, err := pool.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		assert.NoError(t, err)
	})
	scoped, err := pgstore.New(pool, &pgstore.Options{Table: schema + ".idem"})
	require.NoError(t, err)
	require.NoError(t, scoped.Migrate(ctx))
	other, _, _ := newStore(t, nil)

	a, err := scoped.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimAcquired, a.Status)
	b, err := other.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimAcquired, b.Status, "the same key in another table is another key")
}
