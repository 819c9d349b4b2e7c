package retryriver_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"go.uber.org/goleak"

	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/steadfast-go/retry/pgstore"
)

// TestMain runs the tests, or, when helperEnv is set, the helper process
// the test binary was started as (see multiprocess_test.go).
func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		os.Exit(runHelperProcess(role))
	}
	goleak.VerifyTestMain(m)
}

// testPool returns a pool on the test server (see pgdltest.Pool: skipped
// without one, failed under CI=true).
func testPool(t testing.TB) *pgxpool.Pool { return pgdltest.Pool(t) }

// riverSchema creates a schema of its own for the test, with River's
// tables migrated into it, and drops it when the test ends.
func riverSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "river_test_" + hex.EncodeToString(b[:])
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	return schema
}

// startClient starts a River client on schema with workers, stopped when
// the test ends. Its fetch poll interval is short, so that jobs due in
// the near future run on time.
func startClient(t testing.TB, pool *pgxpool.Pool, schema string, workers *river.Workers, edit func(*river.Config)) *river.Client[pgx.Tx] {
	t.Helper()
	cfg := &river.Config{
		Schema:            schema,
		Workers:           workers,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}},
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		TestOnly:          true,
	}
	if edit != nil {
		edit(cfg)
	}
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.Stop(ctx); err != nil {
			t.Errorf("stopping the River client: %v", err)
		}
	})
	return client
}

// idemStore returns a migrated pgstore on a table of its own.
func idemStore(t testing.TB, pool *pgxpool.Pool) *pgstore.Store {
	t.Helper()
	table := pgdltest.Table(t, pool) // a unique name, dropped at the end
	s, err := pgstore.New(pool, &pgstore.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitEvent returns the next event of the job with id, failing the test
// after 10s.
func waitEvent(t testing.TB, events <-chan *river.Event, id int64) *river.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Job != nil && ev.Job.ID == id {
				return ev
			}
		case <-timeout:
			t.Fatalf("no event for job %d within 10s", id)
			return nil
		}
	}
}

// jobState reads a job's row.
func jobRow(t testing.TB, client *river.Client[pgx.Tx], id int64) *rivertype.JobRow {
	t.Helper()
	row, err := client.JobGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return row
}
