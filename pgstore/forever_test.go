package pgstore_test

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forever is the longest Duration, the usual "never expire".
const forever = time.Duration(math.MaxInt64)

// TestForeverLeaseAndRetention claims, renews and completes with the
// longest Durations, and near them, on the server's clock: the key stays
// held, then completed. micros once computed d+999ns, which wraps there,
// so the expiry landed 292 years in the past and a second caller
// acquired the key.
func TestForeverLeaseAndRetention(t *testing.T) {
	store, pool, table := newStore(t, nil)
	ctx := context.Background()
	for _, d := range []time.Duration{forever, forever - 1, forever - 998, forever - 999, forever - 1000} {
		key := "k" + d.String()
		a, err := store.Claim(ctx, key, "fp", d)
		require.NoError(t, err)
		require.Equal(t, idempotency.ClaimAcquired, a.Status)
		b, err := store.Claim(ctx, key, "fp", d)
		require.NoError(t, err)
		assert.Equal(t, idempotency.ClaimHeld, b.Status, "lease %v", d)
		require.NoError(t, store.Renew(ctx, key, a.Token, d))
		b, err = store.Claim(ctx, key, "fp", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, idempotency.ClaimHeld, b.Status, "renewed for %v", d)

		require.NoError(t, store.Complete(ctx, key, a.Token, idempotency.StoredOutcome{Value: []byte("v")}, d))
		c, err := store.Claim(ctx, key, "fp", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, idempotency.ClaimCompleted, c.Status, "retention %v", d)
		var far bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT expires_at > now() + interval '292 years' FROM "+
			pgx.Identifier{table}.Sanitize()+" WHERE key = $1", []byte(key)).Scan(&far))
		assert.True(t, far, "retention %v ends 292 years ahead", d)
	}
}

// TestForeverRetentionThroughDo runs the same key twice with a "forever"
// retention: fn runs once. It ran twice when the outcome expired at once.
func TestForeverRetentionThroughDo(t *testing.T) {
	store, _, _ := newStore(t, nil)
	r, err := retry.New(retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "order-1", Retention: forever, Lease: forever}))
	require.NoError(t, err)
	var runs atomic.Int32
	for range 2 {
		require.NoError(t, r.Do(context.Background(), func(context.Context) error { runs.Add(1); return nil }))
	}
	assert.Equal(t, int32(1), runs.Load())
}

// TestForeverOnInjectedClock stores the expiry computed on the clock,
// rounded up to the microsecond, and caps one beyond PostgreSQL's latest
// timestamp there instead of failing with "timestamp out of range".
func TestForeverOnInjectedClock(t *testing.T) {
	mock := clock.NewMock()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mock.Set(start)
	store, pool, table := newStore(t, &pgstore.Options{Clock: mock})
	ctx := context.Background()
	expiry := func(key string) time.Time {
		var at time.Time
		require.NoError(t, pool.QueryRow(ctx, "SELECT expires_at FROM "+pgx.Identifier{table}.Sanitize()+" WHERE key = $1", []byte(key)).Scan(&at))
		return at.UTC()
	}

	a, err := store.Claim(ctx, "k", "fp", forever)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, a.Status)
	assert.Equal(t, start.Add(forever).Truncate(time.Microsecond).Add(time.Microsecond), expiry("k"))
	mock.Add(200 * 365 * 24 * time.Hour)
	b, err := store.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimHeld, b.Status, "200 years into a forever lease")

	latest := time.Date(294276, time.December, 31, 23, 59, 59, 999999000, time.UTC)
	mock.Set(latest.Add(-time.Hour))
	c, err := store.Claim(ctx, "late", "fp", forever)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimAcquired, c.Status)
	assert.Equal(t, latest, expiry("late"))
	require.NoError(t, store.Complete(ctx, "late", c.Token, idempotency.StoredOutcome{Value: []byte("v")}, forever))
	assert.Equal(t, latest, expiry("late"))
	d, err := store.Claim(ctx, "late", "fp", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimCompleted, d.Status)
}
