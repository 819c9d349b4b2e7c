package redisstore_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/redisstore"
)

// silentServer accepts connections and never answers, like a Redis that
// hangs. It returns its address; it stops when the test ends.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(io.Discard, conn) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestDoFailsClosedWhenRedisHangs: with ContextTimeoutEnabled, the
// store timeout of Do bounds each store call, even though the client's own
// timeouts are a minute.
func TestDoFailsClosedWhenRedisHangs(t *testing.T) {
	c := redis.NewClient(&redis.Options{
		Addr: silentServer(t), ContextTimeoutEnabled: true,
		DialTimeout: time.Minute, ReadTimeout: time.Minute, WriteTimeout: time.Minute,
	})
	t.Cleanup(func() { _ = c.Close() })
	s, err := redisstore.New(c)
	require.NoError(t, err)

	ctx := retry.ContextWithIdempotencyKey(context.Background(), "k")
	called := false
	start := time.Now()
	err = retry.Do(ctx, func(context.Context) error { called = true; return nil },
		retry.WithIdempotency(s, &retry.IdempotencyOptions{StoreTimeout: 20 * time.Millisecond}))
	require.ErrorIs(t, err, retry.ErrIdempotencyUnavailable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, called)
	assert.Less(t, time.Since(start), 30*time.Second, "the call waited for the client's own timeouts")
}
