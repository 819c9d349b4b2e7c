package retryriver_test

import (
	"context"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgdeadletter"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/steadfast-go/retry/retryriver"
)

type SendEmailArgs struct {
	To string `json:"to"`
}

func (SendEmailArgs) Kind() string { return "send_email" }

// Example wraps a River worker with a Retrier: its schedule, its
// idempotency store (the job's ID is the key) and a dead-letter sink for
// the jobs River discards. It needs a PostgreSQL server, so it is not run.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://localhost:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	store, _ := pgstore.New(pool, nil)
	sink, _ := pgdeadletter.New(pool, nil)

	r, err := retry.New(retry.WithName("send-email"),
		retry.WithBackoff(retry.Exponential(time.Second, 2, 10*time.Minute)),
		retry.WithIdempotency(store, nil))
	if err != nil {
		log.Fatal(err)
	}
	w, err := retryriver.Wrap(river.WorkFunc(func(ctx context.Context, job *river.Job[SendEmailArgs]) error {
		return nil // send the email; retry.Permanent(err) for a bad address
	}), r, &retryriver.Options{DeadLetters: sink})
	if err != nil {
		log.Fatal(err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	policy, _ := retryriver.NewPolicy(r)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:      map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}},
		Workers:     workers,
		RetryPolicy: policy, // the same schedule for jobs of unwrapped workers
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = client.Start(ctx)
}
