package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/redisstore"
	"github.com/steadfast-go/retry/storetest"
)

// TestContract runs the store contract suite on the real server.
func TestContract(t *testing.T) {
	runContract(t, func(t *testing.T) idempotency.Store {
		s, _, _ := newStore(t)
		return s
	})
}

// runContract runs the contract suite on the stores newStore makes. Time
// is the server's, so Advance sleeps: 6 waits of 2*Short in all.
func runContract(t *testing.T, newStore func(t *testing.T) idempotency.Store) {
	storetest.TestIdempotencyStore(t, storetest.Harness{
		New:     newStore,
		Advance: func(t *testing.T, d time.Duration) { time.Sleep(d) },
		Short:   10 * time.Millisecond,
	})
}

// TestExactlyOnceThroughDo: 64 goroutines call retry.DoValue with the
// same 200 keys; each key's side effect, an INCR on a separate Redis key,
// happens once, and every caller gets nil and the same stored value.
func TestExactlyOnceThroughDo(t *testing.T) {
	s, c, prefix := newStore(t)
	runExactlyOnce(t, s, c, prefix)
}

// runExactlyOnce runs the exactly-once check on s, counting side effects
// with INCR on c under prefix.
func runExactlyOnce(t *testing.T, s idempotency.Store, c redis.Cmdable, prefix string) {
	counter := func(key string) string { return prefix + "sideeffect:" + key }
	storetest.TestExactlyOnce(t, storetest.ExactlyOnce{
		Store: s,
		SideEffect: func(ctx context.Context, key string) error {
			return c.Incr(ctx, counter(key)).Err()
		},
		Count: func(ctx context.Context, key string) (int, error) {
			return c.Get(ctx, counter(key)).Int()
		},
	})
}

// doOptions are the options of the Do tests: no waits between attempts.
func doOptions(s idempotency.Store, extra ...retry.Option) []retry.Option {
	return append([]retry.Option{
		retry.WithIdempotency(s, nil),
		retry.WithBackoff(retry.Constant(0)),
		retry.WithJitter(retry.NoJitter),
	}, extra...)
}

func TestDoReplaysStoredOutcomes(t *testing.T) {
	s, _, _ := newStore(t)
	var calls atomic.Int32
	charge := func(context.Context) (string, error) {
		n := calls.Add(1)
		return "receipt-" + strconv.Itoa(int(n)), nil
	}
	ctx := retry.ContextWithIdempotencyKey(context.Background(), "charge:order-42")
	for range 3 {
		v, err := retry.DoValue(ctx, charge, doOptions(s)...)
		require.NoError(t, err)
		assert.Equal(t, "receipt-1", v)
	}
	assert.Equal(t, int32(1), calls.Load())

	declined := errors.New("card declined")
	ctx = retry.ContextWithIdempotencyKey(context.Background(), "charge:order-43")
	for i := range 2 {
		err := retry.Do(ctx, func(context.Context) error {
			calls.Add(1)
			return retry.Permanent(declined)
		}, doOptions(s)...)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "card declined")
		assert.Equal(t, i == 1, errors.Is(err, retry.ErrReplayed), "call %d replayed", i+1)
	}
	assert.Equal(t, int32(2), calls.Load(), "the permanent failure is replayed, not run again")
}

func TestDoRefusesKeyReuseWithAnotherPayload(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := retry.ContextWithIdempotencyKey(context.Background(), "k")
	calls := 0
	fn := func(context.Context) error { calls++; return nil }
	require.NoError(t, retry.Do(ctx, fn, doOptions(s, retry.WithPayload([]byte(`{"amount":10}`)))...))

	err := retry.Do(ctx, fn, doOptions(s, retry.WithPayload([]byte(`{"amount":99}`)))...)
	require.ErrorIs(t, err, retry.ErrKeyReuse)
	assert.Equal(t, 1, calls)
	require.NoError(t, retry.Do(ctx, fn, doOptions(s, retry.WithPayload([]byte(`{"amount":10}`)))...))
	assert.Equal(t, 1, calls, "the same payload replays")
}

func TestDoRejectsBadKeysBeforeTheStore(t *testing.T) {
	s, c, prefix := newStore(t)
	for name, key := range map[string]string{
		"empty":     "",
		"oversized": string(make([]byte, 255+1)),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := retry.ContextWithIdempotencyKey(context.Background(), key)
			called := false
			err := retry.Do(ctx, func(context.Context) error { called = true; return nil }, doOptions(s)...)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.False(t, called)
		})
	}
	keys, err := c.Keys(context.Background(), prefix+"*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "nothing written")

	// The longest allowed key works.
	key := string(make([]byte, 255))
	ctx := retry.ContextWithIdempotencyKey(context.Background(), key)
	require.NoError(t, retry.Do(ctx, func(context.Context) error { return nil }, doOptions(s)...))
	n, err := c.Exists(context.Background(), prefix+key).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
}

func TestDoFailsClosedWhenRedisIsDown(t *testing.T) {
	// MaxRetries -1: go-redis would otherwise back off for real between
	// its own retries of the refused connection.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	s, err := redisstore.New(c, nil)
	require.NoError(t, err)

	ctx := retry.ContextWithIdempotencyKey(context.Background(), "k")
	called := false
	err = retry.Do(ctx, func(context.Context) error { called = true; return nil }, doOptions(s)...)
	require.ErrorIs(t, err, retry.ErrIdempotencyUnavailable)
	assert.Contains(t, err.Error(), "redisstore: claim")
	assert.False(t, called, "fn must not run when the store cannot tell whether it already ran")
}

// TestUnknownOutcome runs the unknown-outcome checks on the server's
// clock: a lease of 500ms, renewed every 167ms, so that a store slowed by the
// rest of the suite still answers in time; each subtest takes a few
// seconds.
func TestUnknownOutcome(t *testing.T) {
	s, _, _ := newStore(t)
	storetest.TestUnknownOutcome(t, storetest.UnknownOutcome{New: func(*testing.T) idempotency.Store { return s }, Lease: 500 * time.Millisecond})
}
