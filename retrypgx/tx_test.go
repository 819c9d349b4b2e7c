package retrypgx_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrypgx"
	"github.com/steadfast-go/retry/retrystats"
)

// raise makes the server answer with code, as it would on a conflict.
func raise(ctx context.Context, tx pgx.Tx, code string) error {
	_, err := tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = '`+code+`'; END $$`)
	return err
}

// insertAttempt is a transaction that inserts its run's number into tbl,
// then, on its first run only, fails with first's error.
func insertAttempt(tbl string, runs *int, first func(context.Context, pgx.Tx) error) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		*runs++
		if _, err := tx.Exec(ctx, "INSERT INTO "+tbl+" VALUES ($1)", *runs); err != nil {
			return err
		}
		if *runs == 1 {
			return first(ctx, tx)
		}
		return nil
	}
}

// Each code runs the transaction again, whole, or ends the call at once,
// as the table says; the rows of failed attempts are never committed.
func TestTxRetriesOnCodes(t *testing.T) {
	pool := sharedPool(t)
	tbl := table(t, pool)
	exec(t, pool, "CREATE TABLE "+tbl+" (attempt int)")
	x := runner(t, nil)
	for _, c := range []struct {
		code     string
		attempts int // fn's runs
		ok       bool
	}{
		{"40001", 2, true},
		{"40P01", 2, true},
		{"23505", 1, false},
		{"57014", 1, false},
		{"40003", 1, false},
	} {
		t.Run(c.code, func(t *testing.T) {
			exec(t, pool, "TRUNCATE "+tbl)
			runs := 0
			err := x.Tx(context.Background(), pool, pgx.TxOptions{}, insertAttempt(tbl, &runs, func(ctx context.Context, tx pgx.Tx) error {
				return raise(ctx, tx, c.code)
			}))
			if runs != c.attempts {
				t.Errorf("fn ran %d times, want %d", runs, c.attempts)
			}
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want success %v", err, c.ok)
			}
			if !c.ok {
				var pe *pgconn.PgError
				if !errors.As(err, &pe) || pe.Code != c.code {
					t.Errorf("err = %v, want the server's %s in its chain", err, c.code)
				}
				var re *retry.Error
				if !errors.As(err, &re) {
					t.Errorf("err = %v, want a *retry.Error", err)
				}
			}
			committed := 0
			if c.ok {
				committed = 1
			}
			if n := count(t, pool, "SELECT count(*) FROM "+tbl+" WHERE attempt = $1", runs); n != committed {
				t.Errorf("%d rows of the last attempt, want %d", n, committed)
			}
			if n := count(t, pool, "SELECT count(*) FROM "+tbl+" WHERE attempt <> $1", runs); n != 0 {
				t.Errorf("%d rows of earlier attempts were committed", n)
			}
		})
	}
}

// The value of the attempt that committed comes back.
func TestTxValue(t *testing.T) {
	pool := sharedPool(t)
	x := runner(t, nil)
	runs := 0
	v, err := retrypgx.TxValue(context.Background(), x, pool, pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) (int, error) {
		runs++
		if runs == 1 {
			return 0, raise(ctx, tx, "40001")
		}
		var n int
		err := tx.QueryRow(ctx, "SELECT $1::int * 2", runs).Scan(&n)
		return n, err
	})
	if err != nil || v != 4 {
		t.Fatalf("TxValue = %d, %v; want 4, nil", v, err)
	}
}

// Isolation, read-only and deferrable reach the transaction as given.
func TestTxOptionsPassThrough(t *testing.T) {
	pool := sharedPool(t)
	x := runner(t, nil)
	ctx := context.Background()
	for _, opts := range []pgx.TxOptions{
		{},
		{IsoLevel: pgx.Serializable, AccessMode: pgx.ReadOnly, DeferrableMode: pgx.Deferrable},
		{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadWrite},
	} {
		var iso, ro, def string
		err := x.Tx(ctx, pool, opts, func(ctx context.Context, tx pgx.Tx) error {
			return tx.QueryRow(ctx, "SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only'), current_setting('transaction_deferrable')").Scan(&iso, &ro, &def)
		})
		if err != nil {
			t.Fatal(err)
		}
		wantIso := map[pgx.TxIsoLevel]string{"": "read committed", pgx.Serializable: "serializable", pgx.RepeatableRead: "repeatable read"}[opts.IsoLevel]
		wantRO := map[bool]string{true: "on", false: "off"}[opts.AccessMode == pgx.ReadOnly]
		wantDef := map[bool]string{true: "on", false: "off"}[opts.DeferrableMode == pgx.Deferrable]
		if iso != wantIso || ro != wantRO || def != wantDef {
			t.Errorf("%+v: isolation %q, read-only %q, deferrable %q; want %q, %q, %q", opts, iso, ro, def, wantIso, wantRO, wantDef)
		}
	}
}

// A connection lost before COMMIT (here the server ends the session, as an
// administrator's pg_terminate_backend or a shutdown does: 57P01) leaves
// nothing committed: the transaction runs again on another connection.
func TestTxRetriesLostConnectionBeforeCommit(t *testing.T) {
	pool := sharedPool(t)
	tbl := table(t, pool)
	exec(t, pool, "CREATE TABLE "+tbl+" (attempt int)")
	x := runner(t, nil)
	runs := 0
	err := x.Tx(context.Background(), pool, pgx.TxOptions{}, insertAttempt(tbl, &runs, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT pg_terminate_backend(pg_backend_pid())")
		return err
	}))
	if err != nil || runs != 2 {
		t.Fatalf("err = %v after %d runs; want success after 2", err, runs)
	}
	if n := count(t, pool, "SELECT count(*) FROM "+tbl); n != 1 {
		t.Fatalf("%d rows, want the second attempt's only", n)
	}
}

// Two transactions that lock two rows in opposite orders deadlock; the
// victim (40P01) runs again and both commit. With NoDeadlockRetry the
// victim's call fails with 40P01 instead.
func TestTxDeadlock(t *testing.T) {
	for _, noRetry := range []bool{false, true} {
		t.Run(map[bool]string{false: "retried", true: "NoDeadlockRetry"}[noRetry], func(t *testing.T) {
			pool := sharedPool(t)
			tbl := table(t, pool)
			exec(t, pool, "CREATE TABLE "+tbl+" (id int PRIMARY KEY, n int)")
			exec(t, pool, "INSERT INTO "+tbl+" VALUES (1, 0), (2, 0)")
			x := runner(t, &retrypgx.Options{NoDeadlockRetry: noRetry})

			var locked sync.WaitGroup
			locked.Add(2)
			var runs atomic.Int32
			move := func(first, second int) error {
				attempt := 0
				return x.Tx(context.Background(), pool, pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
					attempt++
					runs.Add(1)
					if _, err := tx.Exec(ctx, "SET LOCAL deadlock_timeout = '20ms'"); err != nil {
						return err
					}
					if _, err := tx.Exec(ctx, "UPDATE "+tbl+" SET n = n + 1 WHERE id = $1", first); err != nil {
						return err
					}
					if attempt == 1 {
						locked.Done()
						locked.Wait() // both hold their first row: a deadlock is certain
					}
					_, err := tx.Exec(ctx, "UPDATE "+tbl+" SET n = n + 1 WHERE id = $1", second)
					return err
				})
			}
			errs := make(chan error, 2)
			go func() { errs <- move(1, 2) }()
			go func() { errs <- move(2, 1) }()
			var failed []error
			for range 2 {
				if err := <-errs; err != nil {
					failed = append(failed, err)
				}
			}
			total := count(t, pool, "SELECT sum(n) FROM "+tbl)
			if !noRetry {
				if len(failed) != 0 || runs.Load() != 3 || total != 4 {
					t.Fatalf("errors %v, %d runs, sum %d; want none, 3 runs (the victim's twice), 4", failed, runs.Load(), total)
				}
				return
			}
			var pe *pgconn.PgError
			if len(failed) != 1 || !errors.As(failed[0], &pe) || pe.Code != "40P01" || !retry.IsPermanent(failed[0]) {
				t.Fatalf("errors %v; want one permanent 40P01", failed)
			}
			if runs.Load() != 2 || total != 2 {
				t.Fatalf("%d runs, sum %d; want 2 runs and the survivor's 2", runs.Load(), total)
			}
		})
	}
}

// The Retrier's limits hold: a conflict on every attempt ends the call
// after WithMaxAttempts, with OutcomeExhausted and the last 40001.
func TestTxExhausted(t *testing.T) {
	pool := sharedPool(t)
	x := runner(t, nil, retry.WithMaxAttempts(3))
	runs := 0
	err := x.Tx(context.Background(), pool, pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		runs++
		return raise(ctx, tx, "40001")
	})
	var re *retry.Error
	if !errors.As(err, &re) || re.Outcome != retry.OutcomeExhausted || re.Attempts != 3 || runs != 3 {
		t.Fatalf("err = %v after %d runs; want OutcomeExhausted after 3 attempts", err, runs)
	}
}

// An error of fn's own is permanent: one run, nothing committed.
func TestTxOwnErrorIsPermanent(t *testing.T) {
	pool := sharedPool(t)
	tbl := table(t, pool)
	exec(t, pool, "CREATE TABLE "+tbl+" (n int)")
	x := runner(t, nil)
	errFunds := errors.New("insufficient funds")
	runs := 0
	err := x.Tx(context.Background(), pool, pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		runs++
		if _, err := tx.Exec(ctx, "INSERT INTO "+tbl+" VALUES (1)"); err != nil {
			return err
		}
		return errFunds
	})
	if !errors.Is(err, errFunds) || !retry.IsPermanent(err) || runs != 1 {
		t.Fatalf("err = %v after %d runs; want the permanent errFunds after 1", err, runs)
	}
	if n := count(t, pool, "SELECT count(*) FROM "+tbl); n != 0 {
		t.Fatalf("%d rows committed by a failed call", n)
	}
}

// A call whose context ends while fn waits ends as the Retrier says,
// without committing: its deadline, with the outcome unknown since fn ran.
func TestTxContextEnds(t *testing.T) {
	pool := sharedPool(t)
	x := runner(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := x.Tx(ctx, pool, pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT pg_sleep(5)")
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, retry.ErrOutcomeUnknown) {
		t.Fatalf("err = %v; want the deadline, and an unknown outcome", err)
	}
}

// The Retrier's observers see the attempts and the outcomes, and its
// deadline rule holds: a call whose next wait cannot end before its
// context's deadline stops at once, with the last 40001 and
// OutcomeDeadline.
func TestTxRetrierRules(t *testing.T) {
	pool := sharedPool(t)
	stats := &retrystats.Stats{}
	x := runner(t, nil, retry.WithObserver(stats), retry.WithBackoff(retry.Constant(time.Hour)), retry.WithJitter(retry.NoJitter))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	runs := 0
	err := x.Tx(ctx, pool, pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		runs++
		return raise(ctx, tx, "40001")
	})
	var re *retry.Error
	var pe *pgconn.PgError
	if !errors.As(err, &re) || re.Outcome != retry.OutcomeDeadline || !errors.As(err, &pe) || pe.Code != "40001" || runs != 1 {
		t.Fatalf("err = %v after %d runs; want OutcomeDeadline with the 40001 after 1", err, runs)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the call took %v: it waited instead of stopping", d)
	}
	if s := stats.Snapshot(); s.Attempts != 1 || s.Deadline != 1 {
		t.Fatalf("observer: %+v; want 1 attempt and 1 call ended by the deadline", s)
	}
}
