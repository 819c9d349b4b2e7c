package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
)

// redisAddrEnv names the Redis of the crash test, as in redisstore's tests.
const redisAddrEnv = "RETRY_TEST_REDIS_ADDR"

// unavailable skips the test without the server, unless its address was
// given explicitly or CI=true: then a missing server is a failure.
func unavailable(t *testing.T, explicit bool, msg string) {
	t.Helper()
	if explicit || os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// testRedis returns the address of the test Redis and a namespace no other
// run uses, whose keys are deleted when the test ends.
func testRedis(t *testing.T) (string, string) {
	addr, explicit := os.Getenv(redisAddrEnv), true
	if addr == "" {
		addr, explicit = "127.0.0.1:6379", false
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		unavailable(t, explicit, fmt.Sprintf("no Redis at %s: %v. Start one (redis-server --port 6379) or set %s=host:port", addr, err, redisAddrEnv))
	}
	ns := testNamespace()
	t.Cleanup(func() {
		assert.NoError(t, deletePrefix(context.Background(), c, ns+":"))
	})
	return addr, ns
}

// testPostgres returns the URL of the test PostgreSQL (as pgdeadletter's
// tests find it) and a namespace no other run uses, whose tables are
// dropped when the test ends.
func testPostgres(t *testing.T) (string, string) {
	url, _ := pgdltest.URL()
	pool := pgdltest.Pool(t)
	ns := testNamespace()
	t.Cleanup(func() {
		for _, table := range []string{ns + "_idempotency", ns + "_dead_letters"} {
			_, err := pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize())
			assert.NoError(t, err)
		}
	})
	return url, ns
}

func testNamespace() string {
	return "notifytest_" + strings.ToLower(rand.Text()[:12])
}

// TestCrashAndRerun: a run that exits abruptly after -crash-at sends, then
// a rerun with the same seed, send every job that can be sent exactly
// once, as the push service's own record of deliveries shows; the rerun
// skips what the crashed run did, because the shared idempotency store
// says so.
func TestCrashAndRerun(t *testing.T) {
	t.Parallel()
	// What one uninterrupted run sends, with the memory store.
	want, _ := runIn(t, testConfig(t), env{})
	require.Positive(t, want.Sent)

	for _, tc := range []struct {
		name  string
		store func(t *testing.T) []string
	}{
		{"redis", func(t *testing.T) []string {
			addr, ns := testRedis(t)
			return []string{"-redis", addr, "-namespace", ns}
		}},
		{"postgres", func(t *testing.T) []string {
			url, ns := testPostgres(t)
			return []string{"-postgres", url, "-namespace", ns}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := tc.store(t)
			dir := t.TempDir()
			deliveries := filepath.Join(dir, "deliveries")
			args := testArgs(dir, append(store, "-deliveries", deliveries)...)
			const crashAt = 150

			code, out := runChild(t, append(args, "-crash-at", fmt.Sprint(crashAt))...)
			require.Equal(t, 3, code, "the crashing run:\n%s", out)
			assert.Contains(t, out, "exiting abruptly with os.Exit(3)")
			assert.NotContains(t, out, "downstream calls per job", "the crashed run printed its summary")
			before := readDeliveries(t, deliveries)
			require.GreaterOrEqual(t, len(before), crashAt)
			require.Less(t, len(before), int(want.Sent))

			code, out = runChild(t, args...)
			require.Equal(t, 0, code, "the rerun:\n%s", out)
			all := readDeliveries(t, deliveries)
			counts := map[string]int{}
			for _, id := range all {
				counts[id]++
			}
			for id, n := range counts {
				assert.Equal(t, 1, n, "job %s was delivered %d times", id, n)
			}
			assert.Len(t, counts, int(want.Sent), "every job that can be sent was sent")
			assert.Regexp(t, fmt.Sprintf(`sent +%d `, int(want.Sent)-len(before)), out)
			assert.Regexp(t, `done by an earlier run +[1-9]`, out)
			assert.Regexp(t, `delivered twice +0 `, out)
		})
	}
}

// readDeliveries reads the push service's record: one job ID a line.
func readDeliveries(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Fields(string(data))
}
