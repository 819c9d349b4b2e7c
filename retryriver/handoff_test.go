package retryriver_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryriver"
)

// A call handed off inside the caller's transaction inserts its job in
// it: the job is there only once the transaction commits, scheduled at
// the end of the wait, with what a worker needs to resume the call.
func TestHandOff_insertsInTheCallersTransaction(t *testing.T) {
	pool := testPool(t)
	schema := riverSchema(t, pool)
	ctx := t.Context()
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler), TestOnly: true})
	require.NoError(t, err)
	h, err := retryriver.NewHandOff(client, &retryriver.HandOffOptions{Queue: "handed-off", MaxAttempts: 5})
	require.NoError(t, err)
	r, err := retry.New(retry.WithName("ship"), retry.WithPayload([]byte(`{"order":7}`)), retry.WithHandOff(h, nil),
		retry.WithBackoff(retry.Constant(time.Hour)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
	require.NoError(t, err)
	fail := func(context.Context) error { return errors.New("downstream unavailable") }
	handOff := func(ctx context.Context) int64 {
		t.Helper()
		var handed *retry.HandedOff
		require.ErrorAs(t, r.Do(ctx, fail), &handed)
		id, err := strconv.ParseInt(handed.ID, 10, 64)
		require.NoError(t, err)
		return id
	}

	// Rolled back: no job.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	id := handOff(retryriver.WithTx(ctx, tx))
	_, err = client.JobGet(ctx, id)
	require.ErrorIs(t, err, river.ErrNotFound, "the job is visible before the transaction commits")
	require.NoError(t, tx.Rollback(ctx))
	_, err = client.JobGet(ctx, id)
	require.ErrorIs(t, err, river.ErrNotFound, "the job outlived its rolled-back transaction")

	// Committed: the job waits for the end of the wait.
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	before := time.Now()
	id = handOff(retryriver.WithTx[pgx.Tx](ctx, tx))
	require.NoError(t, tx.Commit(ctx))
	job, err := client.JobGet(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, rivertype.JobStateScheduled, job.State)
	assert.Equal(t, retryriver.HandOffKind, job.Kind)
	assert.Equal(t, "handed-off", job.Queue)
	assert.Equal(t, 5, job.MaxAttempts)
	assert.WithinRange(t, job.ScheduledAt, before.Add(time.Hour-time.Second), time.Now().Add(time.Hour+time.Second))
	var args retryriver.HandOffArgs
	require.NoError(t, json.Unmarshal(job.EncodedArgs, &args))
	assert.Equal(t, retryriver.HandOffArgs{Name: "ship", Attempts: 1, Wait: time.Hour, Payload: []byte(`{"order":7}`)}, args)

	// No transaction: inserted at once.
	id = handOff(ctx)
	_, err = client.JobGet(ctx, id)
	require.NoError(t, err)
}

// A HandOff that cannot insert leaves the call to wait in memory.
func TestHandOff_failedInsertWaitsInMemory(t *testing.T) {
	pool := testPool(t)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: "no_such_schema", Logger: slog.New(slog.DiscardHandler), TestOnly: true})
	require.NoError(t, err)
	h, err := retryriver.NewHandOff(client, nil)
	require.NoError(t, err)
	_, err = h.HandOff(t.Context(), retry.Waiting{Name: "ship", Attempts: 1, Wait: time.Minute, Due: time.Now().Add(time.Minute)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `retryriver: handing off the attempts of "ship"`)
	r, err := retry.New(retry.WithName("ship"), retry.WithHandOff(h, &retry.HandOffOptions{Threshold: time.Millisecond}),
		retry.WithBackoff(retry.Constant(5*time.Millisecond)), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
	require.NoError(t, err)
	calls := 0
	require.NoError(t, r.Do(t.Context(), func(context.Context) error {
		if calls++; calls == 1 {
			return errors.New("downstream unavailable")
		}
		return nil
	}))
	assert.Equal(t, 2, calls)
}

// The worker goes on with the call's attempts: the first it makes is the
// one after those made, WithMaxAttempts counts them all, and the outcome
// decides the job's.
func TestHandOffWorker_continuesTheCall(t *testing.T) {
	starts := &attemptLog{}
	r, err := retry.New(retry.WithMaxAttempts(3), retry.WithObserver(starts), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}),
		retry.WithBackoff(retry.Constant(time.Millisecond)))
	require.NoError(t, err)
	var got []byte
	fails := 10
	w, err := retryriver.NewHandOffWorker(r, map[string]func(context.Context, []byte) error{
		"ship": func(_ context.Context, payload []byte) error {
			got = payload
			if fails--; fails >= 0 {
				return errors.New("downstream unavailable")
			}
			return nil
		},
	})
	require.NoError(t, err)
	work := func(a retryriver.HandOffArgs) error {
		return w.Work(t.Context(), &river.Job[retryriver.HandOffArgs]{JobRow: &rivertype.JobRow{ID: 1, Attempt: 1, MaxAttempts: 25}, Args: a})
	}

	// Two attempts made: one is left, and it fails; the job is cancelled.
	err = work(retryriver.HandOffArgs{Name: "ship", Attempts: 2, Wait: time.Minute, Payload: []byte("p")})
	var cancel *rivertype.JobCancelError
	require.ErrorAs(t, err, &cancel)
	var e *retry.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retry.OutcomeExhausted, e.Outcome)
	assert.Equal(t, 3, e.Attempts)
	assert.Equal(t, []int{3}, starts.starts)
	assert.Equal(t, []byte("p"), got)

	// One attempt made, and the next succeeds: the job completes.
	starts.starts, fails = nil, 0
	require.NoError(t, work(retryriver.HandOffArgs{Name: "ship", Attempts: 1, Wait: time.Minute}))
	assert.Equal(t, []int{2}, starts.starts)

	// A name no work was registered under cancels the job.
	err = work(retryriver.HandOffArgs{Name: "nope", Attempts: 1})
	require.ErrorAs(t, err, &cancel)
	assert.ErrorIs(t, err, retry.ErrInvalidOption)

	// The job's context ended (the client stopping, River's job timeout):
	// River works the job again, so that no attempt is lost.
	ended, stop := context.WithCancel(t.Context())
	stop()
	late, stopLate := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer stopLate()
	for _, ctx := range []context.Context{ended, late} {
		err = w.Work(ctx, &river.Job[retryriver.HandOffArgs]{JobRow: &rivertype.JobRow{ID: 1, Attempt: 1, MaxAttempts: 25},
			Args: retryriver.HandOffArgs{Name: "ship", Attempts: 1}})
		require.Error(t, err)
		assert.NotErrorAs(t, err, &cancel, "the job was cancelled: %v", err)
		assert.ErrorIs(t, err, ctx.Err())
	}
}

type attemptLog struct{ starts []int }

func (l *attemptLog) OnAttemptStart(_ context.Context, e retry.AttemptStart) {
	l.starts = append(l.starts, e.Attempt)
}
func (*attemptLog) OnAttemptEnd(context.Context, retry.AttemptEnd) {}
func (*attemptLog) OnRetry(context.Context, retry.Scheduled)       {}
func (*attemptLog) OnWaitEnd(context.Context, retry.WaitEnd)       {}
func (*attemptLog) OnDone(context.Context, retry.Done)             {}

func TestHandOff_badInput(t *testing.T) {
	_, err := retryriver.NewHandOff[pgx.Tx](nil, nil)
	assert.ErrorIs(t, err, retry.ErrInvalidOption)
	client, err := river.NewClient[pgx.Tx](riverpgxv5.New(nil), &river.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	_, err = retryriver.NewHandOff(client, &retryriver.HandOffOptions{MaxAttempts: -1})
	assert.ErrorIs(t, err, retry.ErrInvalidOption)
	_, err = retryriver.NewHandOffWorker(nil, nil)
	assert.NoError(t, err, "a nil Retrier is the zero Retrier")
	r, err := retry.New()
	require.NoError(t, err)
	_, err = retryriver.NewHandOffWorker(r, map[string]func(context.Context, []byte) error{"ship": nil})
	assert.ErrorIs(t, err, retry.ErrInvalidOption)
}
