package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/steadfast-go/retry/storetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// effects is a side-effect table: fn inserts a row per run, and the test
// counts them.
type effects struct {
	pool  *pgxpool.Pool
	table string
}

func newEffects(tb testing.TB, pool *pgxpool.Pool) effects {
	e := effects{pool: pool, table: tableName(tb) + "_fx"}
	dropTable(tb, pool, e.table)
	_, err := pool.Exec(context.Background(), "CREATE TABLE "+e.table+" (key text NOT NULL, runner text NOT NULL)")
	require.NoError(tb, err)
	return e
}

func (e effects) insert(ctx context.Context, key, runner string) error {
	_, err := e.pool.Exec(ctx, "INSERT INTO "+e.table+" (key, runner) VALUES ($1, $2)", key, runner)
	return err
}

func (e effects) count(ctx context.Context, key string) (int, error) {
	var n int
	err := e.pool.QueryRow(ctx, "SELECT count(*) FROM "+e.table+" WHERE key = $1", key).Scan(&n)
	return n, err
}

// TestExactlyOnceDo has 64 goroutines call retry.Do with the same 200
// keys: each key's INSERT into the side-effect table happens once, and
// every caller gets the value of the call that ran.
func TestExactlyOnceDo(t *testing.T) {
	store, pool, _ := newStore(t, nil)
	fx := newEffects(t, pool)
	storetest.TestExactlyOnce(t, storetest.ExactlyOnce{
		Store:      store,
		Goroutines: 64,
		Keys:       200,
		SideEffect: func(ctx context.Context, key string) error { return fx.insert(ctx, key, "") },
		Count:      fx.count,
	})
}

func TestDoKeyReuse(t *testing.T) {
	store, _, _ := newStore(t, nil)
	ctx := retry.ContextWithIdempotencyKey(context.Background(), "order-7")
	r, err := retry.New(retry.WithIdempotency(store, nil), retry.WithPayload([]byte(`{"amount":100}`)))
	require.NoError(t, err)
	var calls atomic.Int32
	fn := func(context.Context) (string, error) {
		calls.Add(1)
		return "charged", nil
	}
	v, err := retry.DoValueOn(ctx, r, fn)
	require.NoError(t, err)
	assert.Equal(t, "charged", v)

	other, err := r.With(retry.WithPayload([]byte(`{"amount":999}`)))
	require.NoError(t, err)
	v, err = retry.DoValueOn(ctx, other, fn)
	assert.ErrorIs(t, err, retry.ErrKeyReuse)
	assert.Empty(t, v)
	assert.Equal(t, int32(1), calls.Load(), "fn is not called for a reused key")

	v, err = retry.DoValueOn(ctx, r, fn)
	require.NoError(t, err)
	assert.Equal(t, "charged", v, "the stored outcome is unchanged")
	assert.Equal(t, int32(1), calls.Load())
}

// TestDoStoreDown points the store at a closed port: Do fails closed.
func TestDoStoreDown(t *testing.T) {
	store, err := pgstore.New(downPool(t), nil)
	require.NoError(t, err)
	called := false
	err = retry.Do(context.Background(), func(context.Context) error {
		called = true
		return nil
	}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "order-1", StoreTimeout: time.Second}))
	require.ErrorIs(t, err, retry.ErrIdempotencyUnavailable)
	assert.False(t, called, "fn must not run when the store cannot say whether it ran")
	assert.ErrorContains(t, err, "pgstore: claim", "the store's error is kept")
	t.Log(err)
}
