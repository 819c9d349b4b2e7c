// Package retrypgx runs a function in a PostgreSQL transaction and runs it
// again, whole, when the database says to try again: on a [retry.Retrier]'s
// policy (attempts, backoff, jitter, budget, breaker, time budget,
// deadline, observers, idempotency, dead letters), for pgx v5 and for
// database/sql.
//
//	r, _ := retry.New(retry.WithMaxAttempts(10), retry.WithName("transfer"))
//	x, _ := retrypgx.New(r, nil)
//	err := x.Tx(ctx, pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(ctx context.Context, tx pgx.Tx) error {
//		return transfer(ctx, tx, from, to, amount)
//	})
//
// fn runs again from the start in a new transaction: PostgreSQL's
// documentation (section 13.5, Serialization Failure Handling,
// https://www.postgresql.org/docs/15/mvcc-serialization-failure-handling.html)
// asks that the complete transaction be retried, with the logic that
// decides which statements to send and which values to use. Keep effects
// outside the database out of fn, or make them idempotent.
//
// # What is retried
//
// [Runner.Classify] decides, by SQLSTATE and by where the error came:
//
//	error                                        before COMMIT  at COMMIT
//	40001 serialization_failure                  retried        retried
//	40P01 deadlock_detected                      retried (a)    retried (a)
//	40003 statement_completion_unknown           unknown        unknown
//	class 08, 57P01, 57P02, 57P03, 53300         retried        unknown
//	  (lost connection, shutdown, crash, recovery, no slot)
//	any FATAL or PANIC answer                    by its code    unknown
//	connection failure without a SQLSTATE        retried        unknown (b)
//	  (reset, EOF, refused, closed, timeout)
//	the context ended                            the Retrier's rules (c)
//	Options.RetryCodes                           retried        retried
//	any other SQLSTATE                           permanent      permanent
//	fn's own errors                              permanent
//	pgx.ErrTxCommitRollback                                     permanent
//
// (a) unless [Options.NoDeadlockRetry]. (b) retried when COMMIT never left
// the client (pgconn.SafeToRetry, driver.ErrBadConn, sql.ErrTxDone). (c)
// the call's context ended: the call ends ([retry.OutcomeUnknown] once fn
// ran); a [retry.WithAttemptTimeout] ended: retried before COMMIT, unknown
// at COMMIT.
//
// Before COMMIT nothing is committed: PostgreSQL rolls back a transaction
// whose statement failed or whose connection ended, so the transaction
// runs again. An ERROR answer to COMMIT also means it rolled back. What
// is not retried is marked [retry.Permanent]; [retry.WithRetryIf] may
// narrow what is retried further, never widen it. An error of fn that
// holds a [*retry.Error] (a Retrier inside fn gave up) is left to the
// Retrier's rules for those.
//
// Deadlocks are retried by default, as the same section advises ("It may
// also be advisable to retry deadlock failures"): PostgreSQL aborts one
// victim whole and lets the others go on, so the victim's next attempt
// usually finds the locks free. A deadlock on every attempt is a
// lock-order bug that the attempts limit bounds and the attempts' errors
// show; NoDeadlockRetry makes 40P01 permanent for those who would rather
// see it at once.
//
// # COMMIT whose outcome is unknown
//
// A connection lost while COMMIT was in flight, a FATAL answer to it, or
// 40003, leave the transaction committed or not, and nothing the client
// has can tell: the call ends at once with [retry.OutcomeUnknown], its
// error matching [retry.ErrOutcomeUnknown] and [ErrCommitOutcomeUnknown],
// and fn is not run again, even with [retry.OverloadOptions].NestedRetries. With
// [retry.WithIdempotency] the key's rules for unknown outcomes apply: by
// default the outcome is kept and replayed for later calls with the key
// (at most once); with AtLeastOnce a later call runs again.
//
// Running it again is safe when the transaction records its own key: an
// idempotency row inserted in the same transaction commits or rolls back
// with the work, so a later run finds it and does nothing.
//
//	tag, err := tx.Exec(ctx, `INSERT INTO done (key) VALUES ($1) ON CONFLICT DO NOTHING`, key)
//	if err != nil || tag.RowsAffected() == 0 {
//		return err // nil: done before
//	}
//	return transfer(ctx, tx, from, to, amount)
//
// # CockroachDB
//
// [Options.CockroachRestart] runs a call's attempts in one transaction with
// CockroachDB's savepoint protocol (SAVEPOINT cockroach_restart, ROLLBACK
// TO SAVEPOINT before each retry, RELEASE SAVEPOINT, which commits there,
// then COMMIT); a lost connection begins a new transaction. RELEASE is
// classified as COMMIT is. CockroachDB reports an ambiguous commit as
// 40003: unknown. The option is tested only against PostgreSQL here, by
// the statements sent and the transaction id kept; no CockroachDB server
// ran the tests.
//
// # Budgets
//
// A Retrier from [retry.New] has a retry budget: under heavy contention
// serialization failures can exceed it, and calls end with
// [retry.OutcomeRefused]. Size it ([retry.OverloadOptions].Budget) for the conflicts
// the workload has, or remove it with WithOverload(&OverloadOptions{NoBudget: true}).
package retrypgx
