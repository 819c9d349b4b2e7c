package retryriver_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/steadfast-go/retry/retryriver"
)

// TestWorker_redeliveredJobDoesNotRepeatItsSideEffect loses the result of
// a job's first attempt after its work ran, as a crash before River
// records it does: River works the job again, and the idempotency store
// replays the success instead of charging twice.
func TestWorker_redeliveredJobDoesNotRepeatItsSideEffect(t *testing.T) {
	pool := testPool(t)
	assert.Equal(t, 1, redeliver(t, pool, retry.WithIdempotency(idemStore(t, pool), nil)), "the side effect ran once")
}

// TestWorker_redeliveredJobRepeatsItsSideEffectWithoutIdempotency is the
// control run of the test above, with a Retrier without WithIdempotency:
// the side effect runs again when River works the job again, which is
// what the store prevents there.
func TestWorker_redeliveredJobRepeatsItsSideEffectWithoutIdempotency(t *testing.T) {
	assert.Equal(t, 2, redeliver(t, testPool(t)), "the side effect ran on each delivery")
}

// redeliver runs an order job whose first result is lost through a
// Retrier with opts, and returns how many times its side effect ran.
func redeliver(t *testing.T, pool *pgxpool.Pool, opts ...retry.Option) int {
	t.Helper()
	schema := riverSchema(t, pool)
	table := pgdltest.Table(t, pool)
	ctx := t.Context()
	_, err := pool.Exec(ctx, "CREATE TABLE "+table+" (job_id bigint NOT NULL, order_id text NOT NULL)")
	require.NoError(t, err)

	r, err := retry.New(append(opts, retry.WithBackoff(retry.Constant(0)))...)
	require.NoError(t, err)
	w, err := retryriver.Wrap[orderArgs](&orderWorker{pool: pool, table: table}, r, nil)
	require.NoError(t, err)
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	lose := river.WorkerMiddlewareFunc(func(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
		err := doInner(ctx)
		if job.Attempt == 1 {
			require.NoError(t, err, "the first attempt's work ran")
			return errors.New("the process died before River recorded the result")
		}
		return err
	})
	client := startClient(t, pool, schema, workers, func(c *river.Config) { c.Middleware = []rivertype.Middleware{lose} })
	events, stop := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
	defer stop()

	res, err := client.Insert(ctx, orderArgs{Order: "42"}, nil)
	require.NoError(t, err)
	ev := waitEvent(t, events, res.Job.ID)
	require.Equal(t, river.EventKindJobFailed, ev.Kind, "the first result is lost")
	ev = waitEvent(t, events, res.Job.ID)
	require.Equal(t, river.EventKindJobCompleted, ev.Kind)
	assert.Equal(t, 2, ev.Job.Attempt, "River worked the job twice")

	var runs int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE job_id = $1", res.Job.ID).Scan(&runs))
	return runs
}
