package retryriver_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/steadfast-go/retry/retryriver"
)

// pathClient starts a River client on a schema of its own with w, and
// subscribes to every event of a job's end, failure or snooze.
func pathClient[T river.JobArgs](t *testing.T, pool *pgxpool.Pool, w river.Worker[T]) (*river.Client[pgx.Tx], <-chan *river.Event) {
	t.Helper()
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client := startClient(t, pool, riverSchema(t, pool), workers, nil)
	events, stop := client.Subscribe(river.EventKindJobCancelled, river.EventKindJobCompleted,
		river.EventKindJobFailed, river.EventKindJobSnoozed)
	t.Cleanup(stop)
	return client, events
}

type panicArgs struct {
	Note string `json:"note"`
}

func (panicArgs) Kind() string { return "retryriver_panic" }

// panicWorker panics on every attempt.
type panicWorker struct {
	river.WorkerDefaults[panicArgs]
	runs atomic.Int32
}

func (w *panicWorker) Work(context.Context, *river.Job[panicArgs]) error {
	w.runs.Add(1)
	panic("boom")
}

// TestWorker_panicOnTheLastAttemptIsDeadLettered: a worker that panics is
// retried as for any failure; on its last attempt, which River discards,
// the Worker writes the dead letter before the panic goes on to River,
// and on the attempts before it writes none.
func TestWorker_panicOnTheLastAttemptIsDeadLettered(t *testing.T) {
	pool := testPool(t)
	sink := pgdltest.Sink(t, pool)
	r, err := retry.New(retry.WithBackoff(retry.Constant(10*time.Millisecond)), retry.WithJitter(retry.NoJitter))
	require.NoError(t, err)
	inner := &panicWorker{}
	w, err := retryriver.Wrap[panicArgs](inner, r, &retryriver.Options{DeadLetters: sink})
	require.NoError(t, err)
	client, events := pathClient(t, pool, w)
	ctx := t.Context()

	res, err := client.Insert(ctx, panicArgs{Note: "order 42"}, &river.InsertOpts{MaxAttempts: 2})
	require.NoError(t, err)
	ev := waitEvent(t, events, res.Job.ID)
	require.Equal(t, river.EventKindJobFailed, ev.Kind)
	assert.Equal(t, rivertype.JobStateAvailable, ev.Job.State, "retried")
	pending, err := sink.Pending(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending, "no dead letter before the last attempt")

	ev = waitEvent(t, events, res.Job.ID)
	require.Equal(t, river.EventKindJobFailed, ev.Kind)
	assert.Equal(t, rivertype.JobStateDiscarded, ev.Job.State)
	require.Len(t, ev.Job.Errors, 2)
	assert.Contains(t, ev.Job.Errors[1].Error, "boom", "River saw the panic")
	assert.NotEmpty(t, ev.Job.Errors[1].Trace, "as a panic, with its stack")
	assert.Equal(t, int32(2), inner.runs.Load())

	pending, err = sink.Pending(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	dl := pending[0]
	assert.Equal(t, "retryriver_panic", dl.Name)
	assert.JSONEq(t, `{"note":"order 42"}`, string(dl.Payload))
	assert.Equal(t, retryriver.JobKey(ev.Job), dl.IdempotencyKey)
	assert.Equal(t, 2, dl.Attempts)
	assert.Equal(t, retry.OutcomeExhausted, dl.Reason)
	assert.Equal(t, "panic: boom", dl.LastError)
	require.Len(t, dl.Errors, 2)
	assert.Equal(t, []int{1, 2}, []int{dl.Errors[0].Attempt, dl.Errors[1].Attempt})
	assert.Contains(t, dl.Errors[0].Error, "boom", "the first attempt's panic, as River recorded it")
}

// afterWorker fails every attempt with a retry.After of 10ms.
type afterWorker struct {
	river.WorkerDefaults[outcomeArgs]
	runs atomic.Int32
}

func (w *afterWorker) Work(context.Context, *river.Job[outcomeArgs]) error {
	w.runs.Add(1)
	return retry.After(errTransient, 10*time.Millisecond)
}

// TestWorker_snoozesAreBoundedByMaxAttempts: a job that always asks to
// be called again later is snoozed MaxAttempts times, which River does
// not count as attempts; after that, each After failure is a retryable
// one, so the job uses its MaxAttempts attempts and ends discarded and
// dead-lettered rather than snoozing for ever.
func TestWorker_snoozesAreBoundedByMaxAttempts(t *testing.T) {
	pool := testPool(t)
	sink := pgdltest.Sink(t, pool)
	r, err := retry.New(retry.WithBackoff(retry.Constant(10*time.Millisecond)), retry.WithJitter(retry.NoJitter))
	require.NoError(t, err)
	inner := &afterWorker{}
	w, err := retryriver.Wrap[outcomeArgs](inner, r, &retryriver.Options{DeadLetters: sink})
	require.NoError(t, err)
	client, events := pathClient(t, pool, w)
	ctx := t.Context()

	const maxAttempts = 2
	res, err := client.Insert(ctx, outcomeArgs{Mode: "after", Note: "order 42"}, &river.InsertOpts{MaxAttempts: maxAttempts})
	require.NoError(t, err)
	var kinds []river.EventKind
	var ev *river.Event
	for range 2*maxAttempts + 1 { // a last event would be a bug
		ev = waitEvent(t, events, res.Job.ID)
		kinds = append(kinds, ev.Kind)
		if ev.Job.State == rivertype.JobStateDiscarded {
			break
		}
	}
	assert.Equal(t, []river.EventKind{river.EventKindJobSnoozed, river.EventKindJobSnoozed,
		river.EventKindJobFailed, river.EventKindJobFailed}, kinds, "MaxAttempts snoozes, then MaxAttempts failed attempts")
	assert.Equal(t, rivertype.JobStateDiscarded, ev.Job.State)
	assert.Equal(t, maxAttempts, ev.Job.Attempt)
	var meta struct {
		Snoozes int `json:"snoozes"`
	}
	require.NoError(t, json.Unmarshal(ev.Job.Metadata, &meta))
	assert.Equal(t, maxAttempts, meta.Snoozes)
	assert.Equal(t, int32(2*maxAttempts), inner.runs.Load(), "the worker ran for each snooze and each attempt")

	pending, err := sink.Pending(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, maxAttempts, pending[0].Attempts)
	assert.Contains(t, pending[0].LastError, "downstream unavailable")
}

type orderArgs struct {
	Order string `json:"order"`
	Fail  bool   `json:"fail"`
}

func (orderArgs) Kind() string { return "retryriver_order" }

// orderWorker charges an order, a row per run in a table (not idempotent
// by itself); it fails instead if the args say so.
type orderWorker struct {
	river.WorkerDefaults[orderArgs]
	pool  *pgxpool.Pool
	table string
}

func (w *orderWorker) Work(ctx context.Context, job *river.Job[orderArgs]) error {
	if job.Args.Fail {
		return errTransient
	}
	_, err := w.pool.Exec(ctx, "INSERT INTO "+w.table+" (job_id, order_id) VALUES ($1, $2)", job.ID, job.Args.Order)
	return err
}

// orderKey is an Options.Key from the job's args: two jobs for the same
// order share it.
func orderKey(job *rivertype.JobRow) string {
	var a orderArgs
	_ = json.Unmarshal(job.EncodedArgs, &a)
	return "charge:order-" + a.Order
}

// TestWorker_keyOption: with Options.Key, the key is the caller's, not the
// job's ID: a second job for an order already charged replays the first
// one's success instead of charging again, one for another order
// charges, and a dead letter carries the key.
func TestWorker_keyOption(t *testing.T) {
	pool := testPool(t)
	sink := pgdltest.Sink(t, pool)
	table := pgdltest.Table(t, pool)
	ctx := t.Context()
	_, err := pool.Exec(ctx, "CREATE TABLE "+table+" (job_id bigint NOT NULL, order_id text NOT NULL)")
	require.NoError(t, err)
	r, err := retry.New(retry.WithIdempotency(idemStore(t, pool), nil))
	require.NoError(t, err)
	w, err := retryriver.Wrap[orderArgs](&orderWorker{pool: pool, table: table}, r,
		&retryriver.Options{DeadLetters: sink, Key: orderKey})
	require.NoError(t, err)
	client, events := pathClient(t, pool, w)

	run := func(args orderArgs) *rivertype.JobRow {
		t.Helper()
		res, err := client.Insert(ctx, args, &river.InsertOpts{MaxAttempts: 1})
		require.NoError(t, err)
		return waitEvent(t, events, res.Job.ID).Job
	}
	first := run(orderArgs{Order: "7"})
	assert.Equal(t, rivertype.JobStateCompleted, first.State)
	second := run(orderArgs{Order: "7"})
	assert.Equal(t, rivertype.JobStateCompleted, second.State, "the first one's success, replayed")
	other := run(orderArgs{Order: "8"})
	assert.Equal(t, rivertype.JobStateCompleted, other.State)

	charged := map[string][]int64{}
	rows, err := pool.Query(ctx, "SELECT order_id, job_id FROM "+table)
	require.NoError(t, err)
	for rows.Next() {
		var order string
		var id int64
		require.NoError(t, rows.Scan(&order, &id))
		charged[order] = append(charged[order], id)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, map[string][]int64{"7": {first.ID}, "8": {other.ID}}, charged, "order 7 charged once, by the first job")

	failed := run(orderArgs{Order: "9", Fail: true})
	assert.Equal(t, rivertype.JobStateDiscarded, failed.State)
	pending, err := sink.Pending(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, "charge:order-9", pending[0].IdempotencyKey, "the key of Options.Key")
}

// failingSink refuses every dead letter.
type failingSink struct{ puts atomic.Int32 }

var errSinkDown = errors.New("dead-letter table unavailable")

func (s *failingSink) Put(context.Context, retry.DeadLetter) error {
	s.puts.Add(1)
	return errSinkDown
}

// TestWorker_failingSink: when the dead letter of a job's last attempt is
// not recorded, the attempt's error says so (ErrDeadLetterNotRecorded,
// and why) besides its own failure, without the job's key or args, and
// River keeps the job as discarded.
func TestWorker_failingSink(t *testing.T) {
	r, err := retry.New()
	require.NoError(t, err)
	sink := &failingSink{}
	w, err := retryriver.Wrap[outcomeArgs](&outcomeWorker{returned: map[int64][]time.Time{}}, r,
		&retryriver.Options{DeadLetters: sink})
	require.NoError(t, err)

	t.Run("the error of the last attempt", func(t *testing.T) {
		args := outcomeArgs{Mode: "always", Note: "order 42"}
		encoded, err := json.Marshal(args)
		require.NoError(t, err)
		job := &river.Job[outcomeArgs]{Args: args, JobRow: &rivertype.JobRow{
			ID: 9, Kind: args.Kind(), Attempt: 3, MaxAttempts: 3, EncodedArgs: encoded, CreatedAt: time.Now(),
		}}
		err = w.Work(t.Context(), job)
		require.ErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
		assert.ErrorIs(t, err, errSinkDown, "why it was not recorded")
		assert.ErrorIs(t, err, errTransient, "the attempt's own failure")
		var cancel *rivertype.JobCancelError
		assert.False(t, errors.As(err, &cancel), "a failure River discards, not a cancel")
		assert.NotContains(t, err.Error(), "order 42", "the payload")
		assert.NotContains(t, err.Error(), retryriver.JobKey(job.JobRow), "the key")
		assert.Equal(t, int32(1), sink.puts.Load())

		job.Attempt = 2 // not the last: no dead letter
		err = w.Work(t.Context(), job)
		assert.ErrorIs(t, err, errTransient)
		assert.NotErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
		assert.Equal(t, int32(1), sink.puts.Load())
	})

	t.Run("on River", func(t *testing.T) {
		pool := testPool(t)
		client, events := pathClient(t, pool, w)
		res, err := client.Insert(t.Context(), outcomeArgs{Mode: "always", Note: "order 42"}, &river.InsertOpts{MaxAttempts: 1})
		require.NoError(t, err)
		ev := waitEvent(t, events, res.Job.ID)
		require.Equal(t, river.EventKindJobFailed, ev.Kind)
		assert.Equal(t, rivertype.JobStateDiscarded, ev.Job.State)
		require.Len(t, ev.Job.Errors, 1)
		msg := ev.Job.Errors[0].Error
		assert.Contains(t, msg, retry.ErrDeadLetterNotRecorded.Error())
		assert.Contains(t, msg, errSinkDown.Error())
		assert.Contains(t, msg, errTransient.Error())
		assert.Equal(t, int32(2), sink.puts.Load())
	})
}
