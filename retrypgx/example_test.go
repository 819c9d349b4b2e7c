package retrypgx_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrypgx"
)

// A transfer under SERIALIZABLE, run again whole on a conflict. It needs
// a database, so this example is compiled but not run.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	r, err := retry.New(retry.WithMaxAttempts(10), retry.WithName("transfer"))
	if err != nil {
		log.Fatal(err)
	}
	x, err := retrypgx.New(r, nil)
	if err != nil {
		log.Fatal(err)
	}
	key := "transfer:8d2f"
	err = x.Tx(ctx, pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(ctx context.Context, tx pgx.Tx) error {
		// The idempotency row commits with the transfer: running the
		// call again after an unknown outcome does nothing twice.
		tag, err := tx.Exec(ctx, "INSERT INTO done (key) VALUES ($1) ON CONFLICT DO NOTHING", key)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 10 WHERE id = 1"); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE accounts SET balance = balance + 10 WHERE id = 2")
		return err
	})
	switch {
	case errors.Is(err, retry.ErrOutcomeUnknown):
		log.Print("the transfer may have committed: run it again with the same key")
	case err != nil:
		log.Fatal(err)
	}
}

// What a Runner makes of errors, before COMMIT and at COMMIT.
func ExampleRunner_Classify() {
	x, err := retrypgx.New(nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range []struct {
		name string
		err  error
	}{
		{"40001 serialization_failure", &pgconn.PgError{Severity: "ERROR", Code: "40001"}},
		{"40P01 deadlock_detected", &pgconn.PgError{Severity: "ERROR", Code: "40P01"}},
		{"57P01 admin_shutdown", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}},
		{"connection lost", io.ErrUnexpectedEOF},
		{"23505 unique_violation", &pgconn.PgError{Severity: "ERROR", Code: "23505"}},
	} {
		fmt.Printf("%-28s %-9s %s\n", e.name, x.Classify(e.err, retrypgx.BeforeCommit), x.Classify(e.err, retrypgx.AtCommit))
	}
	// Output:
	// 40001 serialization_failure  retryable retryable
	// 40P01 deadlock_detected      retryable retryable
	// 57P01 admin_shutdown         retryable unknown
	// connection lost              retryable unknown
	// 23505 unique_violation       permanent permanent
}
