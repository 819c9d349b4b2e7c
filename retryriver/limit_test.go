package retryriver_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/steadfast-go/retry/retryriver"
	"github.com/steadfast-go/retry/retrytest"
)

// runs is how many attempts of job id returned.
func (w *outcomeWorker) runs(id int64) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.returned[id])
}

// fullLimit returns a limit of one permit, which the test holds: every
// attempt is refused until the test gives it back.
func fullLimit(t *testing.T) *overload.Adaptive {
	t.Helper()
	l, err := overload.NewAdaptive(overload.AdaptiveOptions{Min: 1, Max: 1})
	require.NoError(t, err)
	require.NoError(t, l.Acquire(context.Background(), overload.Attempt{}))
	return l
}

// A River attempt of Wrap's Worker is one call of the Retrier's Do, so
// it takes a permit of the Retrier's limit: a full limit refuses it
// before the wrapped worker runs, and River retries the job at the
// Policy's time, as any retryable failure, spending one of its attempts.
// Once the limit has room the job runs. A refusal on the job's last
// attempt discards it, dead-lettered with the reason refused.
func TestWorker_limitRefusalIsRetriedByRiver(t *testing.T) {
	pool := testPool(t)
	l := fullLimit(t)
	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Limit: l, NoBudget: true}),
		retry.WithBackoff(retry.Constant(50*time.Millisecond)), retry.WithJitter(retry.NoJitter))
	require.NoError(t, err)
	sink := pgdltest.Sink(t, pool)
	inner := &outcomeWorker{returned: map[int64][]time.Time{}}
	w, err := retryriver.Wrap[outcomeArgs](inner, r, &retryriver.Options{DeadLetters: sink})
	require.NoError(t, err)
	client, events := pathClient(t, pool, w)

	t.Run("retried by River", func(t *testing.T) {
		res, err := client.Insert(t.Context(), outcomeArgs{Mode: "ok"}, &river.InsertOpts{MaxAttempts: 5})
		require.NoError(t, err)
		ev := waitEvent(t, events, res.Job.ID)
		require.Equal(t, river.EventKindJobFailed, ev.Kind, "the refused attempt is a failure River retries")
		assert.Contains(t, []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStateRetryable}, ev.Job.State)
		require.Len(t, ev.Job.Errors, 1)
		assert.Contains(t, ev.Job.Errors[0].Error, overload.ErrLimitExceeded.Error())
		assert.Zero(t, inner.runs(res.Job.ID), "the wrapped worker did not run")
		l.Release(overload.Dropped, 0) // room: a later attempt runs
		for ev.Kind != river.EventKindJobCompleted {
			// River may have started the next attempt before the release.
			require.Equal(t, river.EventKindJobFailed, ev.Kind)
			require.NotEqual(t, rivertype.JobStateDiscarded, ev.Job.State, "the job ran out of attempts")
			ev = waitEvent(t, events, res.Job.ID)
		}
		assert.Equal(t, 1, inner.runs(res.Job.ID), "the wrapped worker ran once, when the limit had room")
		assert.Zero(t, l.Stats().InFlight)
		pending, err := sink.Pending(t.Context())
		require.NoError(t, err)
		assert.Empty(t, pending)
	})

	t.Run("refused on the last attempt", func(t *testing.T) {
		require.NoError(t, l.Acquire(context.Background(), overload.Attempt{}))
		defer l.Release(overload.Dropped, 0)
		res, err := client.Insert(t.Context(), outcomeArgs{Mode: "ok", Note: "order 43"}, &river.InsertOpts{MaxAttempts: 1})
		require.NoError(t, err)
		ev := waitEvent(t, events, res.Job.ID)
		require.Equal(t, river.EventKindJobFailed, ev.Kind)
		assert.Equal(t, rivertype.JobStateDiscarded, ev.Job.State)
		pending, err := sink.Pending(t.Context())
		require.NoError(t, err)
		require.Len(t, pending, 1)
		dl := pending[0]
		assert.Equal(t, retry.OutcomeRefused, dl.Reason)
		assert.Equal(t, 1, dl.Attempts)
		assert.JSONEq(t, `{"mode":"ok","note":"order 43"}`, string(dl.Payload))
		assert.Empty(t, dl.LastError, "no attempt ran: Do's dead letters leave it empty too")
	})
}

// A HandOffWorker runs the job's call through the Retrier's Do too, so
// its attempts take permits; the resumed call's first attempt is a retry
// to the limit (the call made attempts before it was handed off), shed
// before first attempts. A refusal ends the call with OutcomeRefused, as
// a budget's does: the job is cancelled, not retried by River, and the
// Retrier's WithDeadLetter keeps the call (refused calls are kept by
// default), to redrive.
func TestHandOffWorker_limitRefusalCancelsTheJob(t *testing.T) {
	pool := testPool(t)
	l := fullLimit(t)
	sink := deadletter.NewMemorySink()
	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Limit: l, NoBudget: true}), retry.WithDeadLetter(sink, nil),
		retry.WithIdempotency(idemStore(t, pool), nil))
	require.NoError(t, err)
	var ran atomic.Int32
	w, err := retryriver.NewHandOffWorker(r, map[string]func(context.Context, []byte) error{
		"ship": func(context.Context, []byte) error { ran.Add(1); return nil },
	})
	require.NoError(t, err)
	client, events := pathClient(t, pool, w)
	res, err := client.Insert(t.Context(), retryriver.HandOffArgs{Name: "ship", Attempts: 2, Key: "order-1", Payload: []byte(`{"order":1}`)}, nil)
	require.NoError(t, err)
	ev := waitEvent(t, events, res.Job.ID)
	assert.Equal(t, river.EventKindJobCancelled, ev.Kind)
	require.NotEmpty(t, ev.Job.Errors)
	assert.Contains(t, ev.Job.Errors[0].Error, overload.ErrLimitExceeded.Error())
	assert.NotContains(t, ev.Job.Errors[0].Error, "order-1", "the key is in the job's error")
	assert.Zero(t, ran.Load(), "fn did not run")
	letters := sink.Records()
	require.Len(t, letters, 1)
	assert.Equal(t, retry.OutcomeRefused, letters[0].Reason)
	assert.Equal(t, "ship", letters[0].Name)
	assert.Equal(t, 2, letters[0].Attempts, "the attempts of the call before it was handed off")
	assert.Equal(t, "order-1", letters[0].IdempotencyKey)
	assert.Equal(t, `{"order":1}`, string(letters[0].Payload))

	// Once the limit has room, the same call under the same key runs:
	// the store kept no outcome of the refused one, which a redrive
	// would otherwise replay.
	l.Release(overload.Dropped, 0)
	rr, err := r.With(retry.WithName("ship"))
	require.NoError(t, err)
	require.NoError(t, rr.Do(retry.ContextWithIdempotencyKey(t.Context(), "order-1"), func(context.Context) error { ran.Add(1); return nil }))
	assert.Equal(t, int32(1), ran.Load())
}

// A refusal by the Retrier's rate (OverloadOptions.Rate) under Wrap is a
// refusal as the limit's is: a retryable failure, which River retries at
// the Policy's time, spending an attempt; the job runs once the rate has
// room.
func TestWorker_rateRefusalIsRetriedByRiver(t *testing.T) {
	pool := testPool(t)
	clk := retrytest.NewClock()
	rate, err := overload.NewRate(overload.RateOptions{PerSecond: 1, Burst: 1, Clock: clk})
	require.NoError(t, err)
	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Rate: rate, NoBudget: true}),
		retry.WithBackoff(retry.Constant(50*time.Millisecond)), retry.WithJitter(retry.NoJitter))
	require.NoError(t, err)
	inner := &outcomeWorker{returned: map[int64][]time.Time{}}
	w, err := retryriver.Wrap[outcomeArgs](inner, r, nil)
	require.NoError(t, err)
	client, events := pathClient(t, pool, w)
	require.NoError(t, rate.Admit(t.Context(), overload.Attempt{})) // the rate's room, taken

	res, err := client.Insert(t.Context(), outcomeArgs{Mode: "ok"}, &river.InsertOpts{MaxAttempts: 25})
	require.NoError(t, err)
	ev := waitEvent(t, events, res.Job.ID)
	require.Equal(t, river.EventKindJobFailed, ev.Kind, "the refused attempt is a failure River retries")
	require.Len(t, ev.Job.Errors, 1)
	assert.Contains(t, ev.Job.Errors[0].Error, overload.ErrRateLimited.Error())
	assert.Zero(t, inner.runs(res.Job.ID))
	clk.Add(time.Second) // room
	for ev.Kind != river.EventKindJobCompleted {
		require.Equal(t, river.EventKindJobFailed, ev.Kind) // River may have retried before the room
		require.NotEqual(t, rivertype.JobStateDiscarded, ev.Job.State)
		ev = waitEvent(t, events, res.Job.ID)
	}
	assert.Equal(t, 1, inner.runs(res.Job.ID))
}
