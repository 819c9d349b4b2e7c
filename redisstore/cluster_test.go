package redisstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/redisstore"
)

// clusterEnv names the seed nodes of a Redis Cluster, comma-separated.
// Unset, the tests use defaultClusterAddrs, where
// scripts/redis-cluster.sh start runs one.
const clusterEnv = "RETRY_TEST_REDIS_CLUSTER_ADDRS"

const defaultClusterAddrs = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"

// clusterAddrs returns the cluster's seed nodes and whether they were
// asked for explicitly.
func clusterAddrs() ([]string, bool) {
	if addrs := os.Getenv(clusterEnv); addrs != "" {
		return strings.Split(addrs, ","), true
	}
	return strings.Split(defaultClusterAddrs, ","), false
}

// needCluster returns the cluster's seed nodes. With no cluster there it
// skips the test, unless the nodes were given explicitly or CI=true: then
// a missing cluster is a failure, not a silent pass.
func needCluster(t *testing.T) []string {
	t.Helper()
	addrs, explicit := clusterAddrs()
	return clusterOrSkip(t, addrs, explicit, clusterDown())
}

// clusterOrSkip is needCluster for the nodes at addrs, with down the
// error of asking them.
func clusterOrSkip(tb testing.TB, addrs []string, explicit bool, down error) []string {
	tb.Helper()
	if down != nil {
		msg := fmt.Sprintf("no Redis Cluster at %s: %v. Start one with scripts/redis-cluster.sh start, or set %s=host:port,...", strings.Join(addrs, ","), down, clusterEnv)
		if explicit || os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return addrs
}

// clusterDown asks the cluster once per test binary whether it is up and
// serving every slot.
var clusterDown = sync.OnceValue(func() error {
	addrs, _ := clusterAddrs()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return errors.New("cluster_state is not ok")
	}
	return nil
})

// newClusterStore returns a store on the cluster under a fresh prefix,
// deleting the prefix's keys on every master when the test ends.
func newClusterStore(t *testing.T) (*redisstore.Store, *redis.ClusterClient, string) {
	t.Helper()
	addrs := needCluster(t)
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
	s, err := redisstore.New(c, &redisstore.Options{Prefix: prefix})
	require.NoError(t, err)
	return s, c, prefix
}

func TestClusterContract(t *testing.T) {
	needCluster(t)
	runContract(t, func(t *testing.T) idempotency.Store {
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

// TestClusterStaleSlotMapFollowsRedirects: a client whose slot map puts
// every slot on one master, as after a resharding it has not seen yet,
// sends most commands to the wrong node. The node answers MOVED, which
// the claim reads raw as a reply rather than an error; it sends the
// claim again for go-redis to follow the redirect. Every key is
// claimed, completed and replayed, on the master that owns it.
func TestClusterStaleSlotMapFollowsRedirects(t *testing.T) {
	_, c, prefix := newClusterStore(t)
	addrs := needCluster(t)
	stale := redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: addrs[0]}}}}, nil
		},
	})
	t.Cleanup(func() { _ = stale.Close() })
	sets := &commandCounter{name: "set"}
	stale.AddHook(sets)
	s, err := redisstore.New(stale, &redisstore.Options{Prefix: prefix})
	require.NoError(t, err)

	ctx := context.Background()
	const keys = 60
	rec := idempotency.StoredOutcome{Value: []byte("v")}
	for i := range keys {
		key := "order-" + strconv.Itoa(i)
		cl, err := s.Claim(ctx, key, fp, time.Minute)
		require.NoError(t, err)
		require.Equal(t, idempotency.ClaimAcquired, cl.Status)
		require.NoError(t, s.Complete(ctx, key, cl.Token, rec, time.Minute))
		assertClaim(t, s, key, idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: fp, Outcome: rec})
		n, err := c.Exists(ctx, prefix+key).Result() // through the true slot map
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
	}
	assert.Greater(t, sets.n.Load(), int64(2*keys), "claims sent again after a MOVED")
}

// Without a cluster the cluster tests skip, unless CI=true or the nodes
// were chosen: then they fail.
func TestClusterOrSkip(t *testing.T) {
	addrs := []string{"127.0.0.1:1"}
	down := errors.New("connection refused")
	for _, tc := range []struct {
		ci, explicit bool
		down         error
		want         string
	}{
		{down: down, want: "skip"},
		{ci: true, down: down, want: "fatal"},
		{explicit: true, down: down, want: "fatal"},
		{ci: true, want: "ok"},
	} {
		ci := ""
		if tc.ci {
			ci = "true"
		}
		t.Setenv("CI", ci)
		tb := &stopRecorder{TB: t}
		done := make(chan []string)
		go func() {
			var got []string
			defer func() { done <- got }()
			got = clusterOrSkip(tb, addrs, tc.explicit, tc.down)
			tb.stopped = "ok"
		}()
		got := <-done
		assert.Equal(t, tc.want, tb.stopped, "CI=%q, explicit %v, down %v", ci, tc.explicit, tc.down)
		if tc.want == "ok" {
			assert.Equal(t, addrs, got)
		} else {
			assert.Contains(t, tb.msg, "no Redis Cluster at 127.0.0.1:1: connection refused. Start one with scripts/redis-cluster.sh start")
		}
	}
}

// stopRecorder records a Fatal or a Skip and ends the goroutine that
// called it, as testing does.
type stopRecorder struct {
	testing.TB
	stopped, msg string
}

func (r *stopRecorder) Helper() {}

func (r *stopRecorder) Fatal(args ...any) { r.stop("fatal", args) }

func (r *stopRecorder) Skip(args ...any) { r.stop("skip", args) }

func (r *stopRecorder) stop(how string, args []any) {
	r.stopped, r.msg = how, fmt.Sprint(args...)
	runtime.Goexit()
}
