package redisstore_test

import (
	"context"
	"errors"
	"net"
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
)

// roundTrips counts what a client sends: commands through go-redis's
// hooks, and writes on its connections. go-redis writes each command (or
// pipeline) in one write and then waits for the reply, so writes count
// network round trips, including any re-send the client makes.
type roundTrips struct {
	commands, pipelines, writes atomic.Int64
}

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, writes: &r.writes}, nil
	}
}

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.commands.Add(1)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.pipelines.Add(1)
		return next(ctx, cmds)
	}
}

func (r *roundTrips) reset() {
	r.commands.Store(0)
	r.pipelines.Store(0)
	r.writes.Store(0)
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// newCountedStore is newStore on a client of its own that counts round
// trips, with poolSize connections (0: go-redis's default), warmed up so
// that a connection is open and the server has cached every script.
func newCountedStore(tb testing.TB, poolSize int) (*redisstore.Store, *roundTrips) {
	s, rt, _, _ := newCountedStoreOn(tb, poolSize)
	return s, rt
}

// newCountedStoreOn is newCountedStore that also returns the client and
// the store's prefix, for benchmarks that send raw commands beside it.
func newCountedStoreOn(tb testing.TB, poolSize int) (*redisstore.Store, *roundTrips, *redis.Client, string) {
	tb.Helper()
	addr, _ := redisAddr()
	newClient(tb) // skips or fails when there is no server
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: poolSize})
	tb.Cleanup(func() { _ = c.Close() })
	rt := &roundTrips{}
	c.AddHook(rt)
	prefix := testPrefix(tb, c)
	s, err := redisstore.New(c, &redisstore.Options{Prefix: prefix})
	require.NoError(tb, err)

	ctx := context.Background()
	cl, err := s.Claim(ctx, "warm", fp, time.Minute)
	require.NoError(tb, err)
	require.NoError(tb, s.Renew(ctx, "warm", cl.Token, time.Minute))
	require.NoError(tb, s.Release(ctx, "warm", cl.Token))
	cl, err = s.Claim(ctx, "warm", fp, time.Minute)
	require.NoError(tb, err)
	require.NoError(tb, s.Complete(ctx, "warm", cl.Token, idempotency.StoredOutcome{}, time.Minute))
	rt.reset()
	return s, rt, c, prefix
}

// TestRoundTrips: a first-time key costs two round trips, claim and
// complete; a replay of a completed key costs one.
func TestRoundTrips(t *testing.T) {
	s, rt := newCountedStore(t, 1)
	ctx := context.Background()
	const keys = 100
	for i := range keys {
		key := "k" + strconv.Itoa(i)
		cl, err := s.Claim(ctx, key, fp, time.Minute)
		require.NoError(t, err)
		require.Equal(t, idempotency.ClaimAcquired, cl.Status)
		require.NoError(t, s.Complete(ctx, key, cl.Token, idempotency.StoredOutcome{Value: []byte("v")}, time.Minute))
	}
	assert.Equal(t, int64(2*keys), rt.writes.Load(), "round trips for %d first-time keys", keys)
	assert.Equal(t, int64(2*keys), rt.commands.Load())
	assert.Equal(t, int64(0), rt.pipelines.Load())
	t.Logf("first-time key: %.1f round trips (claim + complete)", float64(rt.writes.Load())/keys)

	rt.reset()
	for i := range keys {
		cl, err := s.Claim(ctx, "k"+strconv.Itoa(i), fp, time.Minute)
		require.NoError(t, err)
		require.Equal(t, idempotency.ClaimCompleted, cl.Status)
	}
	assert.Equal(t, int64(keys), rt.writes.Load(), "round trips for %d replays", keys)
	t.Logf("completed key: %.1f round trips (claim returns the record)", float64(rt.writes.Load())/keys)
}

// TestRoundTripsThroughDo counts what retry.Do costs with this store: a
// first-time key two round trips (claim, complete), a replay one, and
// each retry one more (renew).
func TestRoundTripsThroughDo(t *testing.T) {
	s, rt := newCountedStore(t, 1)
	r, err := retry.New(retry.WithIdempotency(s, nil), retry.WithBackoff(retry.Constant(0)))
	require.NoError(t, err)
	ok := func(context.Context) (string, error) { return "receipt", nil }
	failOnce := func() func(context.Context) (string, error) {
		failed := false
		return func(context.Context) (string, error) {
			if !failed {
				failed = true
				return "", errors.New("connection reset")
			}
			return "receipt", nil
		}
	}

	cases := []struct {
		name string
		key  string
		fn   func(context.Context) (string, error)
		want int64
	}{
		{"first-time key", "fresh", ok, 2},
		{"replay of a completed key", "fresh", ok, 1},
		{"first-time key, one retry", "flaky", failOnce(), 3},
	}
	for _, tc := range cases {
		rt.reset()
		ctx := retry.ContextWithIdempotencyKey(context.Background(), tc.key)
		v, err := retry.DoValueOn(ctx, r, tc.fn)
		require.NoError(t, err)
		require.Equal(t, "receipt", v)
		assert.Equal(t, tc.want, rt.writes.Load(), "round trips: %s", tc.name)
		t.Logf("%s: %d round trips", tc.name, rt.writes.Load())
	}
}
