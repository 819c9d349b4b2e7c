package redisstore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/steadfast-go/retry/redisstore"
)

// addrEnv names the Redis server the tests use; see README.md.
const addrEnv = "RETRY_TEST_REDIS_ADDR"

func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		os.Exit(runHelperProcess(role))
	}
	goleak.VerifyTestMain(m)
}

// redisAddr returns the test server's address and whether it was asked
// for explicitly.
func redisAddr() (string, bool) {
	if addr := os.Getenv(addrEnv); addr != "" {
		return addr, true
	}
	return "127.0.0.1:6379", false
}

// newClient connects to the test server. With no server it skips the
// test, unless the address was given explicitly or CI=true: then a
// missing server is a failure, not a silent pass.
func newClient(tb testing.TB) *redis.Client {
	tb.Helper()
	addr, explicit := redisAddr()
	if err := serverDown(); err != nil {
		msg := fmt.Sprintf("no Redis at %s: %v. Start one (redis-server --port 6379) or set %s=host:port", addr, err, addrEnv)
		if explicit || os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// serverDown pings the test server once per test binary: go-redis retries
// a refused connection for seconds, which every skipped test would pay.
var serverDown = sync.OnceValue(func() error {
	addr, _ := redisAddr()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
})

// testPrefix is a key prefix no other test or run uses. Its keys are
// deleted when the test ends.
func testPrefix(tb testing.TB, c *redis.Client) string {
	tb.Helper()
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, tb.Name())
	prefix := "retrytest:" + name + ":" + rand.Text() + ":"
	tb.Cleanup(func() { deleteKeys(tb, c, prefix) })
	return prefix
}

// deleteKeys deletes every key under prefix, which holds no glob
// characters, one DEL per key so that it works on a cluster node too.
func deleteKeys(tb testing.TB, c *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	pipe := c.Pipeline()
	for iter.Next(ctx) {
		pipe.Del(ctx, iter.Val())
	}
	if err := iter.Err(); err != nil {
		tb.Errorf("cleaning up %s*: %v", prefix, err)
		return
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		tb.Errorf("cleaning up %s*: %v", prefix, err)
	}
}

// newStore returns a store on the test server under a fresh prefix, the
// client and the prefix.
func newStore(tb testing.TB) (*redisstore.Store, *redis.Client, string) {
	tb.Helper()
	c := newClient(tb)
	prefix := testPrefix(tb, c)
	s, err := redisstore.New(c, &redisstore.Options{Prefix: prefix})
	require.NoError(tb, err)
	return s, c, prefix
}

// eventually polls cond every millisecond until it holds or 5s have
// passed; the tests use it to wait for Redis to expire a key.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// commandCounter counts the commands named name that go through a client.
type commandCounter struct {
	name string
	n    atomic.Int64
}

func (h *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == h.name {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
