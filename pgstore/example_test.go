package pgstore_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgstore"
)

// The store needs a database, so this example is compiled but not run.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	store, err := pgstore.New(pool, &pgstore.Options{Table: "billing_idempotency"})
	if err != nil {
		log.Fatal(err) // a nil pool or a bad table name
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	r, err := retry.New(retry.WithIdempotency(store, nil))
	if err != nil {
		log.Fatal(err)
	}
	ctx = retry.ContextWithIdempotencyKey(ctx, "charge:order-42")
	receipt, err := retry.DoValueOn(ctx, r, func(ctx context.Context) (string, error) {
		return "receipt-1", nil // the side effect, run once per key
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Println(receipt)
	// Run store.Cleanup(ctx) from a periodic job.
}
