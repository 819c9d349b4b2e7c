package benchmarks

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/cockroach-go/v2/crdb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/steadfast-go/retry/retrypgx"
)

// The transfer load of retrypgx's issue: 100 goroutines move money
// between 10 accounts under SERIALIZABLE, 3 transfers each, on a
// PostgreSQL server of the benchmark's own, with 20 connections; each
// setup runs the same load on the same server in turn.
const (
	pgGoroutines   = 100
	pgTransfersPer = 3
	pgAccounts     = 10
	pgConns        = 20
	pgOpening      = 1000
)

// pgBank is the server, its pools and the load's tables.
type pgBank struct {
	pool *pgxpool.Pool
	db   *sql.DB
}

func newPGBank(b *testing.B) *pgBank {
	b.Helper()
	srv := pgdltest.StartServer(b)
	cfg, err := pgxpool.ParseConfig(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = pgConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool) // the same connections, through database/sql
	b.Cleanup(func() { db.Close() })
	for _, q := range []string{
		// Opposite transfers deadlock; PostgreSQL's default second
		// before it looks would dominate every figure.
		"ALTER SYSTEM SET deadlock_timeout = '20ms'",
		"SELECT pg_reload_conf()",
		"CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL)",
		"CREATE TABLE transfers (id bigint NOT NULL, src int NOT NULL, dst int NOT NULL, amount bigint NOT NULL)",
	} {
		if _, err := pool.Exec(context.Background(), q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	return &pgBank{pool: pool, db: db}
}

func (k *pgBank) reset(b *testing.B) {
	b.Helper()
	ctx := context.Background()
	if _, err := k.pool.Exec(ctx, "TRUNCATE accounts, transfers"); err != nil {
		b.Fatal(err)
	}
	if _, err := k.pool.Exec(ctx, "INSERT INTO accounts SELECT g, $1 FROM generate_series(0, $2 - 1) g", pgOpening, pgAccounts); err != nil {
		b.Fatal(err)
	}
}

// pgExec is what a transfer needs of a transaction, pgx's or database/sql's.
type pgExec func(ctx context.Context, q string, args ...any) error
type pgQueryInt func(ctx context.Context, q string, args ...any) (int64, error)

func pgTransfer(ctx context.Context, exec pgExec, query pgQueryInt, id int64, src, dst int, amount int64) error {
	balance, err := query(ctx, "SELECT balance FROM accounts WHERE id = $1", src)
	if err != nil {
		return err
	}
	if balance < amount {
		return errors.New("insufficient funds")
	}
	if err := exec(ctx, "UPDATE accounts SET balance = balance - $2 WHERE id = $1", src, amount); err != nil {
		return err
	}
	if err := exec(ctx, "UPDATE accounts SET balance = balance + $2 WHERE id = $1", dst, amount); err != nil {
		return err
	}
	return exec(ctx, "INSERT INTO transfers VALUES ($1, $2, $3, $4)", id, src, dst, amount)
}

func pgxFns(tx pgx.Tx) (pgExec, pgQueryInt) {
	return func(ctx context.Context, q string, args ...any) error {
			_, err := tx.Exec(ctx, q, args...)
			return err
		}, func(ctx context.Context, q string, args ...any) (int64, error) {
			var n int64
			err := tx.QueryRow(ctx, q, args...).Scan(&n)
			return n, err
		}
}

func sqlFns(tx *sql.Tx) (pgExec, pgQueryInt) {
	return func(ctx context.Context, q string, args ...any) error {
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		}, func(ctx context.Context, q string, args ...any) (int64, error) {
			var n int64
			err := tx.QueryRowContext(ctx, q, args...).Scan(&n)
			return n, err
		}
}

// pgSetup runs one transfer through a way of retrying; attempt is called
// once per run of the transaction's body.
type pgSetup struct {
	name string
	run  func(ctx context.Context, k *pgBank, attempt func(), id int64, src, dst int, amount int64) error
}

func pgSetups(b *testing.B) []pgSetup {
	policy := []retry.Option{
		retry.WithMaxAttempts(51), // crdb's 50 retries, and the first attempt
		retry.WithBackoff(retry.Exponential(time.Millisecond, 2, 50*time.Millisecond)),
	}
	runner := func(opts ...retry.Option) *retrypgx.Runner {
		r, err := retry.New(append(slices.Clone(policy), opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		x, err := retrypgx.New(r, nil)
		if err != nil {
			b.Fatal(err)
		}
		return x
	}
	noBudget := runner(retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
	withBudget := runner()
	serializable := pgx.TxOptions{IsoLevel: pgx.Serializable}
	sqlSerializable := &sql.TxOptions{Isolation: sql.LevelSerializable}
	viaPgx := func(x *retrypgx.Runner) func(context.Context, *pgBank, func(), int64, int, int, int64) error {
		return func(ctx context.Context, k *pgBank, attempt func(), id int64, src, dst int, amount int64) error {
			return x.Tx(ctx, k.pool, serializable, func(ctx context.Context, tx pgx.Tx) error {
				attempt()
				exec, query := pgxFns(tx)
				return pgTransfer(ctx, exec, query, id, src, dst, amount)
			})
		}
	}
	return []pgSetup{
		{"retrypgx.Tx", viaPgx(noBudget)},
		{"retrypgx.Tx_defaultBudget", viaPgx(withBudget)},
		{"retrypgx.SQLTx", func(ctx context.Context, k *pgBank, attempt func(), id int64, src, dst int, amount int64) error {
			return noBudget.SQLTx(ctx, k.db, sqlSerializable, func(ctx context.Context, tx *sql.Tx) error {
				attempt()
				exec, query := sqlFns(tx)
				return pgTransfer(ctx, exec, query, id, src, dst, amount)
			})
		}},
		{"crdb.ExecuteTx", func(ctx context.Context, k *pgBank, attempt func(), id int64, src, dst int, amount int64) error {
			return crdb.ExecuteTx(ctx, k.db, sqlSerializable, func(tx *sql.Tx) error {
				attempt()
				exec, query := sqlFns(tx)
				return pgTransfer(ctx, exec, query, id, src, dst, amount)
			})
		}},
	}
}

// pgRun is what one run of the load gave.
type pgRun struct {
	reported, lost, applied, failed, attempts int
	latencies                                 []time.Duration
	errs                                      map[string]int // failures by their text's start
}

func (k *pgBank) load(b *testing.B, s pgSetup) pgRun {
	b.Helper()
	k.reset(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var mu sync.Mutex
	run := pgRun{errs: map[string]int{}}
	ok := map[int64]bool{}
	var wg sync.WaitGroup
	for g := range pgGoroutines {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range pgTransfersPer {
				id := int64(g*pgTransfersPer + i)
				src := rnd.IntN(pgAccounts)
				dst := (src + 1 + rnd.IntN(pgAccounts-1)) % pgAccounts
				amount := int64(1 + rnd.IntN(50))
				attempts := 0
				start := time.Now()
				err := s.run(ctx, k, func() { attempts++ }, id, src, dst, amount)
				d := time.Since(start)
				mu.Lock()
				run.attempts += attempts
				run.latencies = append(run.latencies, d)
				ok[id] = err == nil
				if err != nil {
					run.failed++
					text := err.Error()
					run.errs[text[:min(len(text), 90)]]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	rows, err := k.pool.Query(ctx, "SELECT id FROM transfers")
	if err != nil {
		b.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		b.Fatal(err)
	}
	inLedger := map[int64]bool{}
	for _, id := range ids {
		inLedger[id] = true
	}
	run.applied = len(ids)
	for id, good := range ok {
		if good {
			run.reported++
			if !inLedger[id] {
				run.lost++ // reported committed, not in the ledger
			}
		}
	}
	return run
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkPGTransfers runs the load through each setup, once per
// iteration: run it with -benchtime 1x. The metrics per run: transfers
// reported committed, committed in the ledger, reported committed but
// absent (lost silently), failed, attempts per transfer, p50 and p99
// latency of a transfer's call.
func BenchmarkPGTransfers(b *testing.B) {
	k := newPGBank(b)
	for _, s := range pgSetups(b) {
		b.Run(s.name, func(b *testing.B) {
			var last pgRun
			for b.Loop() {
				last = k.load(b, s)
			}
			total := float64(pgGoroutines * pgTransfersPer)
			b.ReportMetric(float64(last.reported), "reported-ok")
			b.ReportMetric(float64(last.applied), "in-ledger")
			b.ReportMetric(float64(last.lost), "lost-silently")
			b.ReportMetric(float64(last.failed), "failed")
			b.ReportMetric(float64(last.attempts)/total, "attempts/transfer")
			b.ReportMetric(float64(percentile(last.latencies, 0.5).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(percentile(last.latencies, 0.99).Microseconds())/1000, "p99-ms")
			b.ReportMetric(0, "ns/op")
			for text, n := range last.errs {
				b.Logf("%d failed with %q", n, text)
			}
		})
	}
}
