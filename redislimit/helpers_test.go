package redislimit_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
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

// needRedis skips the test without a server, unless the address was
// given explicitly or CI=true: then a missing server is a failure, not a
// silent pass. It returns the server's address.
func needRedis(tb testing.TB) string {
	tb.Helper()
	addr, explicit := redisAddr()
	if err := serverDown(); err != nil {
		msg := fmt.Sprintf("no Redis at %s: %v. Start one (redis-server --port 6379) or set %s=host:port", addr, err, addrEnv)
		if explicit || os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return addr
}

// newClient connects to the test server, as needRedis finds it, with
// ContextTimeoutEnabled as redislimit requires.
func newClient(tb testing.TB) *redis.Client {
	tb.Helper()
	return clientAt(tb, needRedis(tb))
}

// clientAt is a client of the server at addr, closed when the test ends.
func clientAt(tb testing.TB, addr string) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
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

// testKey is a Key no other test or run uses. Its Redis keys (the
// limit's, under redis_rate's "rate:" prefix, and a pause share's) are
// deleted when the test ends.
func testKey(tb testing.TB, c *redis.Client) string {
	tb.Helper()
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, tb.Name())
	key := "retrytest:" + name + ":" + rand.Text()
	tb.Cleanup(func() {
		deleteKeys(tb, c, key)
		deleteKeys(tb, c, "rate:"+key)
	})
	return key
}

// deleteKeys deletes every key under prefix, which holds no glob
// characters.
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

// eventually polls cond every millisecond until it holds or d has
// passed.
func eventually(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}
