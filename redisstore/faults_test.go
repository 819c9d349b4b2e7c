package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry/redisstore"
	"github.com/steadfast-go/retry/storetest"
)

// proxiedStore returns a store under a fresh prefix whose client reaches
// the test server through a fault proxy. The client does not retry on
// its own (MaxRetries -1), so that every cut reaches the store and Do,
// and Do's store timeout bounds each command.
func proxiedStore(t *testing.T) (*redisstore.Store, *storetest.FaultProxy) {
	t.Helper()
	direct := newClient(t)
	prefix := testPrefix(t, direct)
	addr, _ := redisAddr()
	proxy := storetest.NewFaultProxy(t, addr, storetest.FaultProxyOptions{Seed: 1})
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	s, err := redisstore.New(c, &redisstore.Options{Prefix: prefix})
	require.NoError(t, err)
	return s, proxy
}

// TestExactlyOnceUnderConnectionCuts: 32 callers go through the same 200
// keys while 2% of the chunks between go-redis and Redis cut their
// connection. Every key's fn runs exactly once in all, no fn runs after
// a plain success for its key, and a call whose outcome could not be
// stored says so.
func TestExactlyOnceUnderConnectionCuts(t *testing.T) {
	s, proxy := proxiedStore(t)
	storetest.TestExactlyOnceUnderFaults(t, storetest.ExactlyOnceUnderFaults{Store: s, Proxy: proxy, CallersPerKey: 32})
}

// TestOutcomeAfterRedisGoes: right after fn succeeds, every connection
// to Redis is cut and new ones are refused, as if Redis died, so that the
// first Complete fails. Back after that failure, well within the lease:
// Do returns nil and the next call replays. Away past the lease: Do
// returns, before the lease ends, an error matching
// retry.ErrOutcomeNotRecorded, and DoValue still returns fn's value.
func TestOutcomeAfterRedisGoes(t *testing.T) {
	s, proxy := proxiedStore(t)
	storetest.TestOutcomeAfterFault(t, storetest.OutcomeFault{
		Store: s,
		Break: func(*testing.T) {
			proxy.Refuse(true)
			proxy.CutAll()
		},
		Mend: func(*testing.T) { proxy.Refuse(false) },
	})
}
