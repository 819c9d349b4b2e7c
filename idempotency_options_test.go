package retry_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
)

func TestIdempotentDefaultRetentionIs24h(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(nil)
		calls := 0
		fn := func(context.Context) error { calls++; return nil }
		require.NoError(t, retry.Do(context.Background(), fn, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"})))
		time.Sleep(24*time.Hour - time.Second)
		require.NoError(t, retry.Do(context.Background(), fn, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"})))
		assert.Equal(t, 1, calls)
		time.Sleep(time.Second)
		require.NoError(t, retry.Do(context.Background(), fn, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"})))
		assert.Equal(t, 2, calls)
	})
}

func TestIdempotencyKeysAreChecked(t *testing.T) {
	store := newFaulty()
	long := strings.Repeat("k", 255+1)
	fn := func(context.Context) error { t.Error("fn called with a bad key"); return nil }

	_, err := retry.New(retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: long}))
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.Contains(t, err.Error(), "256 bytes long; the limit is 255")

	_, err = retry.New(retry.WithIdempotency(nil, &retry.IdempotencyOptions{Key: "k"}))
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.Contains(t, err.Error(), "store must not be nil")

	r, err := retry.New(retry.WithIdempotency(store, nil))
	require.NoError(t, err, "the key may come from the context")
	err = r.Do(context.Background(), fn)
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.Contains(t, err.Error(), "idempotency key is empty")

	err = r.Do(retry.ContextWithIdempotencyKey(context.Background(), long), fn)
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	err = r.Do(retry.ContextWithIdempotencyKey(context.Background(), ""), fn)
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.Equal(t, [4]int{}, store.counts(), "the store is not asked about a bad key")

	calls := 0
	require.NoError(t, r.Do(retry.ContextWithIdempotencyKey(context.Background(), long[1:]), func(context.Context) error {
		calls++
		return nil
	}))
	assert.Equal(t, 1, calls, "a key of exactly 255 bytes is fine")
}

func TestIdempotencyKeyFromContextOverridesTheOption(t *testing.T) {
	store := newFaulty()
	r, err := retry.New(retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "default"}))
	require.NoError(t, err)
	calls := 0
	fn := func(context.Context) error { calls++; return nil }
	require.NoError(t, r.Do(retry.ContextWithIdempotencyKey(context.Background(), "a"), fn))
	require.NoError(t, r.Do(retry.ContextWithIdempotencyKey(context.Background(), "b"), fn))
	require.NoError(t, r.Do(retry.ContextWithIdempotencyKey(context.Background(), "a"), fn))
	require.NoError(t, r.Do(context.Background(), fn))
	assert.Equal(t, 3, calls)

	key, ok := retry.IdempotencyKeyFromContext(retry.ContextWithIdempotencyKey(context.Background(), "x"))
	assert.True(t, ok)
	assert.Equal(t, "x", key)
	_, ok = retry.IdempotencyKeyFromContext(context.Background())
	assert.False(t, ok)
}

func TestIdempotencyLeaseMustOutlastTheAttemptTimeout(t *testing.T) {
	store := newFaulty()
	_, err := retry.New(retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}), retry.WithAttemptTimeout(time.Minute))
	require.ErrorIs(t, err, retry.ErrInvalidOption, "the default 30s lease is shorter than the timeout")
	assert.Contains(t, err.Error(), "must be longer than WithAttemptTimeout")

	_, err = retry.New(retry.WithAttemptTimeout(time.Second), retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", Lease: time.Second}))
	require.ErrorIs(t, err, retry.ErrInvalidOption, "equal is not longer")

	_, err = retry.New(retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", Lease: 2 * time.Second}), retry.WithAttemptTimeout(time.Second))
	require.NoError(t, err)

	for _, o := range []retry.IdempotencyOptions{
		{Lease: -time.Second}, {Retention: -time.Second}, {StoreTimeout: -time.Second},
		{Marshal: json.Marshal}, {Unmarshal: json.Unmarshal},
	} {
		_, err = retry.New(retry.WithIdempotency(store, &o))
		assert.ErrorIs(t, err, retry.ErrInvalidOption, "%+v", o)
	}
}

// A lease no store round trip can keep (30ns, meant as 30s) is refused
// with the reason, not accepted into calls that each fail to record
// their outcome.
func TestIdempotencyLeaseHasAFloor(t *testing.T) {
	store := newFaulty()
	_, err := retry.New(retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", Lease: 30}))
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.ErrorContains(t, err, "IdempotencyOptions.Lease is 30ns; it must be at least 100ms")
	_, err = retry.New(retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", Lease: 100 * time.Millisecond}))
	assert.NoError(t, err)
}

func TestIdempotencyOnWithLeavesTheBaseRetrierAlone(t *testing.T) {
	store := newFaulty()
	base, err := retry.New(retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"}))
	require.NoError(t, err)
	waiting, err := base.With(retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", Lease: time.Minute}), retry.WithAttemptTimeout(45*time.Second))
	require.NoError(t, err)
	_, err = base.With(retry.WithAttemptTimeout(45 * time.Second))
	require.ErrorIs(t, err, retry.ErrInvalidOption, "the base keeps its 30s lease")
	require.NoError(t, waiting.Do(context.Background(), func(context.Context) error { return nil }))
}
