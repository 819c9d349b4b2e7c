package pgstore_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/steadfast-go/retry/storetest"
	"github.com/stretchr/testify/require"
)

// proxiedStore returns a store on a fresh, migrated table whose every
// statement goes through a fault proxy to the test server.
func proxiedStore(t *testing.T) (*pgstore.Store, *storetest.FaultProxy) {
	t.Helper()
	_, direct, table := newStore(t, nil)
	cfg := direct.Config()
	if cfg.ConnConfig.Host == "" || cfg.ConnConfig.Host[0] == '/' {
		t.Skip("the fault proxy needs PostgreSQL on TCP, not on a Unix socket")
	}
	proxy := storetest.NewFaultProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))),
		storetest.FaultProxyOptions{Seed: 1})
	host, port, err := net.SplitHostPort(proxy.Addr())
	require.NoError(t, err)
	p, err := strconv.ParseUint(port, 10, 16)
	require.NoError(t, err)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(p), nil
	cfg.MaxConns = 8 // fewer connections to rebuild after cuts
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	store, err := pgstore.New(pool, &pgstore.Options{Table: table})
	require.NoError(t, err)
	return store, proxy
}

// TestExactlyOnceUnderConnectionCuts: 32 callers, 4 per key, go through
// 200 keys while 2% of the chunks between pgx and PostgreSQL cut their
// connection. Every key's fn runs exactly once in all, no fn runs after
// a plain success for its key, and a call whose outcome could not be
// stored says so. A new connection costs PostgreSQL a process, which on a
// loaded machine can take most of a second: hence the store timeout, the
// lease and the 4 callers per key rather than 32.
func TestExactlyOnceUnderConnectionCuts(t *testing.T) {
	store, proxy := proxiedStore(t)
	storetest.TestExactlyOnceUnderFaults(t, storetest.ExactlyOnceUnderFaults{
		Store: store, Proxy: proxy, CallersPerKey: 4, StoreTimeout: time.Second, Lease: 2 * time.Second,
	})
}

// TestOutcomeAfterTableLock: fn succeeds while another session holds
// LOCK TABLE ... IN ACCESS EXCLUSIVE MODE on the store's table, so that
// Complete waits and times out. Released after the first Complete failed,
// well within the lease: Do returns nil and the next call replays. Held
// past the lease: Do returns, before the lease ends, an error matching
// retry.ErrOutcomeNotRecorded, with the store's timeout in it, and
// DoValue still returns fn's value.
func TestOutcomeAfterTableLock(t *testing.T) {
	store, pool, _ := newStore(t, nil)
	var tx pgx.Tx
	storetest.TestOutcomeAfterFault(t, storetest.OutcomeFault{
		Store: store,
		Break: func(t *testing.T) {
			var err error
			tx, err = pool.Begin(context.Background())
			require.NoError(t, err)
			_, err = tx.Exec(context.Background(), "LOCK TABLE "+store.Table()+" IN ACCESS EXCLUSIVE MODE")
			require.NoError(t, err)
			t.Cleanup(func() { _ = tx.Rollback(context.Background()) }) // before the table is dropped
		},
		Mend:       func(t *testing.T) { require.NoError(t, tx.Rollback(context.Background())) },
		StoreError: context.DeadlineExceeded,
	})
}
