package redisstore_test

import (
	"context"
	"crypto/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/redisstore"
)

// clusterEnv names the seed nodes of a Redis Cluster, comma-separated.
// The cluster tests are optional: without it they skip, in CI too.
const clusterEnv = "RETRY_TEST_REDIS_CLUSTER_ADDRS"

// clusterAddrs returns the cluster's seed nodes, or skips the test.
func clusterAddrs(t *testing.T) []string {
	t.Helper()
	addrs := os.Getenv(clusterEnv)
	if addrs == "" {
		t.Skipf("set %s=host:port,... to run the Redis Cluster tests", clusterEnv)
	}
	return strings.Split(addrs, ",")
}

// newClusterStore returns a store on the cluster under a fresh prefix,
// deleting the prefix's keys on every master when the test ends.
func newClusterStore(t *testing.T) (*redisstore.Store, *redis.ClusterClient, string) {
	t.Helper()
	addrs := clusterAddrs(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	require.NoError(t, c.Ping(ctx).Err(), "cluster at %s", addrs)
	prefix := "retrytest:cluster:" + rand.Text() + ":"
	t.Cleanup(func() {
		err := c.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
			deleteKeys(t, node, prefix)
			return nil
		})
		assert.NoError(t, err)
	})
	s, err := redisstore.New(c, redisstore.WithPrefix(prefix))
	require.NoError(t, err)
	return s, c, prefix
}

func TestClusterContract(t *testing.T) {
	clusterAddrs(t)
	runContract(t, func(t *testing.T) retry.IdempotencyStore {
		s, _, _ := newClusterStore(t)
		return s
	})
}

func TestClusterExactlyOnceThroughDo(t *testing.T) {
	s, c, prefix := newClusterStore(t)
	runExactlyOnce(t, s, c, prefix)
}

// TestClusterSpreadsKeys: with no hash tag in the prefix, keys land on
// every master.
func TestClusterSpreadsKeys(t *testing.T) {
	s, c, prefix := newClusterStore(t)
	ctx := context.Background()
	for i := range 300 {
		_, err := s.Claim(ctx, "order-"+strconv.Itoa(i), fp, time.Minute)
		require.NoError(t, err)
	}
	var (
		mu     sync.Mutex
		counts []int
	)
	require.NoError(t, c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		keys, err := node.Keys(ctx, prefix+"*").Result()
		mu.Lock()
		counts = append(counts, len(keys))
		mu.Unlock()
		return err
	}))
	total := 0
	for _, n := range counts {
		assert.Positive(t, n, "a master holds none of the keys: %v", counts)
		total += n
	}
	assert.Equal(t, 300, total)
	t.Logf("keys per master: %v", counts)
}
