package retrypgx_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrypgx"
)

const (
	accounts       = 10
	openingBalance = 1000
)

var errInsufficientFunds = errors.New("insufficient funds")

// bank is a table of accounts and a ledger of transfers. The ledger's
// transfer id is not unique on purpose: a transfer applied twice shows
// as two rows.
type bank struct {
	pool                *pgxpool.Pool
	accounts, transfers string
}

func newBank(t *testing.T, pool *pgxpool.Pool) *bank {
	t.Helper()
	b := &bank{pool: pool, accounts: table(t, pool), transfers: table(t, pool)}
	exec(t, pool, "CREATE TABLE "+b.accounts+" (id int PRIMARY KEY, balance bigint NOT NULL)")
	exec(t, pool, "CREATE TABLE "+b.transfers+" (id bigint NOT NULL, src int NOT NULL, dst int NOT NULL, amount bigint NOT NULL)")
	exec(t, pool, "INSERT INTO "+b.accounts+" SELECT g, $1 FROM generate_series(0, $2 - 1) g", openingBalance, accounts)
	return b
}

// transfer moves amount from src to dst, read then written, and records
// it under id: the read makes concurrent transfers conflict under
// SERIALIZABLE.
func (b *bank) transfer(ctx context.Context, tx pgx.Tx, id int64, src, dst int, amount int64) error {
	var balance int64
	if err := tx.QueryRow(ctx, "SELECT balance FROM "+b.accounts+" WHERE id = $1", src).Scan(&balance); err != nil {
		return err
	}
	if balance < amount {
		return errInsufficientFunds
	}
	if _, err := tx.Exec(ctx, "UPDATE "+b.accounts+" SET balance = balance - $2 WHERE id = $1", src, amount); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "UPDATE "+b.accounts+" SET balance = balance + $2 WHERE id = $1", dst, amount); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO "+b.transfers+" VALUES ($1, $2, $3, $4)", id, src, dst, amount)
	return err
}

// result is what one transfer's call returned.
type result struct {
	err      error
	attempts int
	at       time.Time
}

// check holds the bank to what the calls returned: a success is in the
// ledger exactly once, a failure not at all, an unknown outcome at most
// once; the money is all there, and every balance is what the ledger
// says. It returns how many unknown outcomes there were, and how many of
// them committed.
func (b *bank) check(t *testing.T, results map[int64]result) (unknown, unknownApplied int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := b.pool.Query(ctx, "SELECT id, count(*) FROM "+b.transfers+" GROUP BY id")
	if err != nil {
		t.Fatal(err)
	}
	applied := map[int64]int{}
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		applied[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id, n := range applied {
		if _, ok := results[id]; !ok {
			t.Errorf("transfer %d is in the ledger %d times, but no call made it", id, n)
		}
	}
	for id, r := range results {
		n := applied[id]
		switch {
		case r.err == nil && n != 1:
			t.Errorf("transfer %d succeeded and is in the ledger %d times", id, n)
		case errors.Is(r.err, retry.ErrOutcomeUnknown):
			unknown++
			unknownApplied += n
			if n > 1 {
				t.Errorf("transfer %d of unknown outcome is in the ledger %d times", id, n)
			}
		case r.err != nil && n != 0:
			t.Errorf("transfer %d failed (%v) and is in the ledger %d times", id, r.err, n)
		}
	}
	total := count(t, b.pool, "SELECT sum(balance) FROM "+b.accounts)
	if total != accounts*openingBalance {
		t.Errorf("the accounts hold %d in all, want %d", total, accounts*openingBalance)
	}
	mismatched := count(t, b.pool, `SELECT count(*) FROM `+b.accounts+` a WHERE a.balance <> $1
		- coalesce((SELECT sum(amount) FROM `+b.transfers+` WHERE src = a.id), 0)
		+ coalesce((SELECT sum(amount) FROM `+b.transfers+` WHERE dst = a.id), 0)`, openingBalance)
	if mismatched != 0 {
		t.Errorf("%d accounts' balances differ from their ledger", mismatched)
	}
	return unknown, unknownApplied
}

// mover runs transfers through x and records what each call returned.
type mover struct {
	b       *bank
	x       *retrypgx.Runner
	nextID  atomic.Int64
	mu      sync.Mutex
	results map[int64]result
}

func (m *mover) move(ctx context.Context, rnd *rand.Rand) {
	id := m.nextID.Add(1)
	src := rnd.IntN(accounts)
	dst := (src + 1 + rnd.IntN(accounts-1)) % accounts
	amount := int64(1 + rnd.IntN(50))
	attempts := 0
	err := m.x.Tx(ctx, m.b.pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(ctx context.Context, tx pgx.Tx) error {
		attempts++
		return m.b.transfer(ctx, tx, id, src, dst, amount)
	})
	m.mu.Lock()
	m.results[id] = result{err: err, attempts: attempts, at: time.Now()}
	m.mu.Unlock()
}

// 100 goroutines move money between 10 accounts under SERIALIZABLE: the
// conflicts are retried, every transfer happens exactly once, and the
// total is unchanged.
func TestTransfersSerializable(t *testing.T) {
	_, pool := ownPool(t, 20)
	b := newBank(t, pool)
	x := runner(t, nil, retry.WithMaxAttempts(1000),
		retry.WithBackoff(retry.Exponential(time.Millisecond, 2, 50*time.Millisecond)))
	m := &mover{b: b, x: x, results: map[int64]result{}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const goroutines, each = 100, 3
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(g), 1))
			for range each {
				m.move(ctx, rnd)
			}
		})
	}
	wg.Wait()
	if len(m.results) != goroutines*each {
		t.Fatalf("%d results, want %d", len(m.results), goroutines*each)
	}
	attempts, failed := 0, 0
	for _, r := range m.results {
		attempts += r.attempts
		if r.err != nil && !errors.Is(r.err, errInsufficientFunds) {
			failed++
			t.Errorf("a transfer failed: %v", r.err)
		}
	}
	if unknown, _ := b.check(t, m.results); unknown != 0 {
		t.Errorf("%d unknown outcomes without a fault", unknown)
	}
	if attempts == len(m.results) {
		t.Errorf("no transfer was retried: the load made no conflict, and the test proves nothing")
	}
	t.Logf("%d transfers, %d attempts (%.2f per transfer), %d failed", len(m.results), attempts, float64(attempts)/float64(len(m.results)), failed)
}

// PostgreSQL killed with SIGKILL and restarted while 100 goroutines move
// money: calls fail, succeed after the restart, or report an unknown
// outcome; no transfer is applied twice, none that failed is applied, and
// every success is in the ledger.
func TestTransfersSurviveRestart(t *testing.T) {
	srv, pool := ownPool(t, 20)
	b := newBank(t, pool)
	// COMMIT takes 10ms, as on a busy disk, so that the kill finds
	// some in flight.
	exec(t, pool, `CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_sleep(0.01); RETURN NULL; END $$`)
	exec(t, pool, `CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON `+b.transfers+`
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()`)
	x := runner(t, nil, retry.WithMaxAttempts(100),
		retry.WithBackoff(retry.Exponential(5*time.Millisecond, 2, 100*time.Millisecond)),
		retry.WithMaxElapsed(5*time.Second))
	m := &mover{b: b, x: x, results: map[int64]result{}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	start := time.Now()
	stop := start.Add(3 * time.Second)
	var restarted atomic.Pointer[time.Time]
	var wg sync.WaitGroup
	wg.Go(func() {
		time.Sleep(800 * time.Millisecond)
		srv.Kill9()
		srv.Start()
		now := time.Now()
		restarted.Store(&now)
	})
	for g := range 100 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(g), 2))
			for time.Now().Before(stop) || restarted.Load() == nil {
				m.move(ctx, rnd)
			}
		})
	}
	wg.Wait()

	after := restarted.Load()
	var ok, okAfter, failed int
	outcomes := map[string]int{}
	for _, r := range m.results {
		switch {
		case r.err == nil:
			ok++
			if r.at.After(*after) {
				okAfter++
			}
		case !errors.Is(r.err, retry.ErrOutcomeUnknown):
			failed++
			var re *retry.Error
			if errors.As(r.err, &re) {
				outcomes[re.Outcome.String()]++
			} else {
				outcomes[fmt.Sprintf("%T", r.err)]++
			}
		}
	}
	unknown, unknownApplied := b.check(t, m.results)
	if okAfter == 0 {
		t.Errorf("no transfer succeeded after the restart")
	}
	t.Logf("%d transfers in %v: %d succeeded (%d after the restart), %d failed %v, %d unknown (%d of them committed); restart took %v",
		len(m.results), time.Since(start).Round(time.Millisecond), ok, okAfter, failed, outcomes, unknown, unknownApplied, after.Sub(start.Add(800*time.Millisecond)).Round(time.Millisecond))
}
