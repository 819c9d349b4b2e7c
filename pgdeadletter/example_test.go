package pgdeadletter_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/pgdeadletter"
)

// Store the dead letters of a service in PostgreSQL, look at the last
// day's, and replay them once the dependency is back. It needs a server,
// so it has no Output and is only compiled.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	sink, err := pgdeadletter.New(pool, &pgdeadletter.Options{Table: "billing.dead_letters"})
	if err != nil {
		log.Fatal(err)
	}
	if err := sink.Migrate(ctx); err != nil { // idempotent: run at every start
		log.Fatal(err)
	}

	r, err := retry.New(retry.WithDeadLetter(sink, nil), retry.WithName("charge-card"))
	if err != nil {
		log.Fatal(err)
	}
	err = r.Do(ctx, func(context.Context) error { return errors.New("503 from the card processor") })
	if errors.Is(err, retry.ErrDeadLetterNotRecorded) {
		log.Print("the work is neither done nor recorded: keep it") // e.g. do not ack the message
	}

	recent, err := sink.List(ctx, deadletter.Filter{
		Name:    "charge-card",
		Reasons: []retry.Outcome{retry.OutcomeExhausted},
		Since:   time.Now().Add(-24 * time.Hour),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(recent), "calls gave up in the last day")

	// Later: replay each pending record once, even with several
	// redrivers at work.
	rep, err := deadletter.Redrive(ctx, sink, r, func(ctx context.Context, dl retry.DeadLetter) error {
		return nil // charge again, with dl.Payload and dl.IdempotencyKey
	}, nil)
	fmt.Println(rep.Succeeded, "replayed", err)
}
