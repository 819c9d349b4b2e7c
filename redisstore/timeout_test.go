package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/redisstore"
	"github.com/steadfast-go/retry/storetest"
)

// silentServer returns the address of a server that accepts connections
// and never answers, like a Redis that hangs: a fault proxy that holds
// every connection. It stops when the test ends.
func silentServer(t *testing.T) string {
	p := storetest.NewFaultProxy(t, "127.0.0.1:1", storetest.FaultProxyOptions{})
	p.Pause(true)
	return p.Addr()
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
	s, err := redisstore.New(c, nil)
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
