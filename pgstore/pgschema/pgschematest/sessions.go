package pgschematest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AppPool returns a pool on the server at url whose sessions carry
// application_name app, so that a test can find them in
// pg_stat_activity ([LockWaits]). It is closed when the test ends.
func AppPool(t testing.TB, url, app string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("AppPool: %v", err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("AppPool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// LockWaits polls, for at most 10 seconds, until n sessions of app wait
// for a lock, and returns what each waits for (pg_stat_activity's
// wait_event), sorted.
func LockWaits(t testing.TB, pool *pgxpool.Pool, app string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows, err := pool.Query(context.Background(),
			"SELECT wait_event FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock' ORDER BY 1", app)
		if err != nil {
			t.Fatalf("LockWaits: %v", err)
		}
		waits, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("LockWaits: %v", err)
		}
		if len(waits) >= n {
			return waits
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("%d sessions wait for a lock after 10s, want %d: %v", len(waits), n, waits)
		}
		time.Sleep(time.Millisecond)
	}
}
