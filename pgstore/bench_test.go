package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/stretchr/testify/require"
)

// The benchmarks run the store beside a floor: hand-written pgx code on
// the same pool and a table of the same schema, making the statements and
// commits a minimal store must (an INSERT … ON CONFLICT claim and an
// UPDATE complete for a fresh key, one SELECT for a replay). Each
// sub-benchmark is named store=pgstore or store=floor, so that
// `benchstat -col /store` gives the ratio; BENCHMARKS.md has the command.
// stmts/op counts the statements each op sends (a pgx tracer); each runs
// in a transaction of its own, and only the INSERT and the UPDATE write,
// so a fresh key makes two commits that wait for the WAL's flush and a
// replay none, in both.

// BenchmarkClaimComplete measures one idempotent call's store traffic on
// a fresh key: a Claim that acquires it (a read, then the insert) and a
// Complete that stores the outcome. ns/op of the 16-caller run is the
// inverse of throughput.
func BenchmarkClaimComplete(b *testing.B) {
	stores, counter := benchStores(b)
	ctx := context.Background()
	var n atomic.Int64 // keys stay fresh across the runs of each sub-benchmark
	forEach(b, stores, counter, func(b *testing.B, s benchStore) {
		if err := s.firstTime(ctx, "k"+strconv.FormatInt(n.Add(1), 10)); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkClaimCompleted measures a replay: a Claim that finds the
// stored outcome (the path every duplicate call takes).
func BenchmarkClaimCompleted(b *testing.B) {
	stores, counter := benchStores(b)
	ctx := context.Background()
	for _, s := range stores {
		require.NoError(b, s.firstTime(ctx, "k"))
	}
	forEach(b, stores, counter, func(b *testing.B, s benchStore) {
		if err := s.replay(ctx, "k"); err != nil {
			b.Fatal(err)
		}
	})
}

// benchRecord is the outcome the benchmarks store and replay.
var benchRecord = idempotency.StoredOutcome{Value: []byte(`{"id":12345,"status":"ok"}`)}

// forEach runs op with 1 and 16 callers: on each store in turn, then on
// both in pairs (see paired).
func forEach(b *testing.B, stores []benchStore, counter *atomic.Int64, op func(*testing.B, benchStore)) {
	for _, callers := range []int{1, 16} {
		for _, s := range stores {
			b.Run("callers="+strconv.Itoa(callers)+"/store="+s.name, func(b *testing.B) {
				b.ReportAllocs()
				start := counter.Load()
				parallel(b, callers, func() { op(b, s) })
				b.ReportMetric(float64(counter.Load()-start)/float64(b.N), "stmts/op")
			})
		}
		b.Run("callers="+strconv.Itoa(callers)+"/store=paired", func(b *testing.B) {
			paired(b, callers, func(i int) { op(b, stores[i]) })
		})
	}
}

// parallel runs op b.N times: in the benchmark's goroutine for one
// caller, else in RunParallel with callers goroutines (callers/GOMAXPROCS
// per CPU, at least one: the work waits on the server).
func parallel(b *testing.B, callers int, op func()) {
	if callers == 1 {
		for b.Loop() {
			op()
		}
		return
	}
	b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			op()
		}
	})
}

// paired runs the store's op and the floor's one after the other, b.N
// times, the order alternating, and reports the median latency of each
// and their ratio (x-floor). On a machine whose load changes from one
// second to the next, the separate runs' ns/op differ by tens of
// percent; op by op, the load hits both alike. With 16 callers both run
// at once, so each one's latency is under the same mixed load.
func paired(b *testing.B, callers int, op func(store int)) {
	var (
		mu    sync.Mutex
		times [2][]time.Duration
		turn  atomic.Int64
	)
	run := func(next func() bool) {
		var mine [2][]time.Duration
		for next() {
			first := int(turn.Add(1) % 2)
			for _, i := range [2]int{first, 1 - first} {
				start := time.Now()
				op(i)
				mine[i] = append(mine[i], time.Since(start))
			}
		}
		mu.Lock()
		times[0], times[1] = append(times[0], mine[0]...), append(times[1], mine[1]...)
		mu.Unlock()
	}
	if callers == 1 {
		run(b.Loop)
	} else {
		b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) { run(pb.Next) })
	}
	store, floor := median(times[0]), median(times[1])
	b.ReportMetric(float64(store.Nanoseconds()), "pgstore-ns/op")
	b.ReportMetric(float64(floor.Nanoseconds()), "floor-ns/op")
	b.ReportMetric(float64(store)/float64(floor), "x-floor")
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// benchStore is one side of a benchmark: the Store or the floor.
type benchStore struct {
	name string
	// firstTime claims a fresh key and completes it with benchRecord.
	firstTime func(ctx context.Context, key string) error
	// replay claims a completed key and checks its outcome.
	replay func(ctx context.Context, key string) error
}

// benchStores returns the store and the floor, each on a fresh table of
// the store's schema, on one warm pool of 16 connections whose statements
// the returned counter counts.
func benchStores(b *testing.B) ([]benchStore, *atomic.Int64) {
	counter := new(statementCounter)
	pool := newPoolWith(b, func(cfg *pgxpool.Config) { cfg.ConnConfig.Tracer = counter })
	warm(b, pool)
	return storeAndFloor(b, pool), &counter.n
}

// storeAndFloor returns the store and the floor on fresh tables of pool.
func storeAndFloor(tb testing.TB, pool *pgxpool.Pool) []benchStore {
	ctx := context.Background()
	var stores [2]*pgstore.Store
	for i := range stores {
		table := tableName(tb)
		store, err := pgstore.New(pool, &pgstore.Options{Table: table})
		require.NoError(tb, err)
		dropTable(tb, pool, table)
		require.NoError(tb, store.Migrate(ctx))
		stores[i] = store
	}
	f := newFloor(pool, stores[1].Table())
	return []benchStore{
		{name: "pgstore", firstTime: storeFirstTime(stores[0]), replay: storeReplay(stores[0])},
		{name: "floor", firstTime: f.firstTime, replay: f.replay},
	}
}

// warm opens all the pool's connections, so that no benchmark pays for
// them.
func warm(b *testing.B, pool *pgxpool.Pool) {
	conns := make([]*pgxpool.Conn, pool.Config().MaxConns)
	for i := range conns {
		c, err := pool.Acquire(context.Background())
		require.NoError(b, err)
		conns[i] = c
	}
	for _, c := range conns {
		c.Release()
	}
}

func storeFirstTime(store *pgstore.Store) func(context.Context, string) error {
	return func(ctx context.Context, key string) error {
		c, err := store.Claim(ctx, key, "fp", time.Minute)
		if err != nil {
			return err
		}
		if c.Status != idempotency.ClaimAcquired {
			return errors.New("claim of a fresh key: " + c.Status.String())
		}
		return store.Complete(ctx, key, c.Token, benchRecord, time.Hour)
	}
}

func storeReplay(store *pgstore.Store) func(context.Context, string) error {
	return func(ctx context.Context, key string) error {
		c, err := store.Claim(ctx, key, "fp", time.Minute)
		if err != nil {
			return err
		}
		if c.Status != idempotency.ClaimCompleted || len(c.Outcome.Value) != len(benchRecord.Value) {
			return errors.New("claim of a completed key: " + c.Status.String())
		}
		return nil
	}
}

// statementCounter is a pgx tracer that counts the statements sent.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// floor is the least a PostgreSQL store does on the measured paths: a
// fresh key is one INSERT … ON CONFLICT that takes the row only when it
// is free, then one UPDATE fenced by the token; a replay is one SELECT of
// the live row. It keeps the store's schema, argument types and random
// token, not its semantics: a claim that finds a live row needs a second
// statement, which these paths never take.
type floor struct {
	pool                  *pgxpool.Pool
	insert, update, query string
}

func newFloor(pool *pgxpool.Pool, table string) *floor {
	return &floor{
		pool: pool,
		insert: `INSERT INTO ` + table + ` AS t (key, fingerprint, token, expires_at)
VALUES ($1, $2, $3, now() + $4::interval)
ON CONFLICT (key) DO UPDATE
SET fingerprint = excluded.fingerprint, token = excluded.token, completed = false,
	expires_at = excluded.expires_at, permanent = false, value = NULL, error = NULL
WHERE t.expires_at <= now()`,
		update: `UPDATE ` + table + `
SET completed = true, token = NULL, expires_at = now() + $3::interval, permanent = $4, value = $5, error = $6
WHERE key = $1 AND token = $2`,
		query: `SELECT fingerprint, completed, permanent, value, error FROM ` + table + `
WHERE key = $1 AND expires_at > now()`,
	}
}

func (f *floor) firstTime(ctx context.Context, key string) error {
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	lease := pgtype.Interval{Microseconds: int64(time.Minute / time.Microsecond), Valid: true}
	tag, err := f.pool.Exec(ctx, f.insert, []byte(key), []byte("fp"), token, lease)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return errors.New("the floor's claim of a fresh key took nothing")
	}
	retention := pgtype.Interval{Microseconds: int64(time.Hour / time.Microsecond), Valid: true}
	tag, err = f.pool.Exec(ctx, f.update, []byte(key), token, retention, benchRecord.Permanent, benchRecord.Value, benchRecord.Error)
	if err == nil && tag.RowsAffected() != 1 {
		err = errors.New("the floor's complete changed nothing")
	}
	return err
}

func (f *floor) replay(ctx context.Context, key string) error {
	var (
		fp, value            []byte
		completed, permanent bool
		msg                  *string
	)
	if err := f.pool.QueryRow(ctx, f.query, []byte(key)).Scan(&fp, &completed, &permanent, &value, &msg); err != nil {
		return err
	}
	if !completed || len(value) != len(benchRecord.Value) {
		return errors.New("the floor's replay found no outcome")
	}
	return nil
}
