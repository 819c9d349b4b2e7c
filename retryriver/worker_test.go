package retryriver_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/steadfast-go/retry/retryriver"
)

// outcomeArgs tell outcomeWorker how to fail.
type outcomeArgs struct {
	Mode string `json:"mode"` // permanent, after, transient, always
	Note string `json:"note"`
}

func (outcomeArgs) Kind() string { return "retryriver_outcome" }

var errTransient = errors.New("downstream unavailable")

// outcomeWorker fails as its args say, and notes when each attempt
// returned.
type outcomeWorker struct {
	river.WorkerDefaults[outcomeArgs]
	fixed    atomic.Bool // "always" succeeds once set: the cause is fixed
	mu       sync.Mutex
	returned map[int64][]time.Time // job ID -> when each attempt returned
}

func (w *outcomeWorker) Work(_ context.Context, job *river.Job[outcomeArgs]) error {
	err := w.fail(job)
	w.mu.Lock()
	w.returned[job.ID] = append(w.returned[job.ID], time.Now())
	w.mu.Unlock()
	return err
}

func (w *outcomeWorker) fail(job *river.Job[outcomeArgs]) error {
	switch job.Args.Mode {
	case "permanent":
		return retry.Permanent(errors.New("card declined"))
	case "after": // once: then the server is ready
		if !hasMetadata(job.Metadata, "snoozes") {
			return retry.After(errTransient, time.Hour)
		}
		return nil
	case "transient": // once
		if job.Attempt == 1 {
			return errTransient
		}
		return nil
	case "always":
		if w.fixed.Load() {
			return nil
		}
		return errTransient
	}
	return nil
}

func hasMetadata(b []byte, s string) bool {
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	_, ok := m[s]
	return ok
}

func (w *outcomeWorker) lastReturn(id int64) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.returned[id]
	return r[len(r)-1]
}

// TestWorker_outcomes runs one job of each outcome through a real River
// client: permanent, After, retryable, final (and its redrive).
func TestWorker_outcomes(t *testing.T) {
	pool := testPool(t)
	schema := riverSchema(t, pool)
	sink := pgdltest.Sink(t, pool)

	const step = 150 * time.Millisecond
	r, err := retry.New(retry.WithBackoff(retry.Constant(step)), retry.WithJitter(retry.NoJitter),
		retry.WithMaxDelay(100*time.Millisecond)) // caps the After of an hour too
	require.NoError(t, err)
	inner := &outcomeWorker{returned: map[int64][]time.Time{}}
	w, err := retryriver.Wrap[outcomeArgs](inner, r, &retryriver.Options{DeadLetters: sink})
	require.NoError(t, err)
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client := startClient(t, pool, schema, workers, nil)
	events, stop := client.Subscribe(river.EventKindJobCancelled, river.EventKindJobCompleted,
		river.EventKindJobFailed, river.EventKindJobSnoozed)
	defer stop()
	ctx := t.Context()
	insert := func(mode string, opts *river.InsertOpts) int64 {
		res, err := client.Insert(ctx, outcomeArgs{Mode: mode, Note: "order 42"}, opts)
		require.NoError(t, err)
		return res.Job.ID
	}

	t.Run("permanent is cancelled", func(t *testing.T) {
		id := insert("permanent", nil)
		ev := waitEvent(t, events, id)
		assert.Equal(t, river.EventKindJobCancelled, ev.Kind)
		assert.Equal(t, rivertype.JobStateCancelled, ev.Job.State)
		require.Len(t, ev.Job.Errors, 1)
		assert.Contains(t, ev.Job.Errors[0].Error, "card declined")
	})

	t.Run("After is snoozed for the capped delay", func(t *testing.T) {
		id := insert("after", nil)
		ev := waitEvent(t, events, id)
		require.Equal(t, river.EventKindJobSnoozed, ev.Kind)
		returned := inner.lastReturn(id)
		due := ev.Job.ScheduledAt.Sub(returned)
		assert.GreaterOrEqual(t, due, 100*time.Millisecond, "the After of an hour, capped by WithMaxDelay")
		assert.Less(t, due, time.Second)
		assert.Equal(t, 0, ev.Job.Attempt, "a snooze is no attempt")
		ev = waitEvent(t, events, id)
		assert.Equal(t, river.EventKindJobCompleted, ev.Kind)
	})

	t.Run("retryable is retried at the policy's time", func(t *testing.T) {
		id := insert("transient", nil)
		ev := waitEvent(t, events, id)
		require.Equal(t, river.EventKindJobFailed, ev.Kind)
		assert.Equal(t, rivertype.JobStateAvailable, ev.Job.State, "due within the scheduler's interval: available at once")
		due := ev.Job.ScheduledAt.Sub(inner.lastReturn(id))
		assert.GreaterOrEqual(t, due, 100*time.Millisecond, "Constant(150ms) capped at 100ms, as Do waits")
		assert.Less(t, due, time.Second)
		scheduled := ev.Job.ScheduledAt
		ev = waitEvent(t, events, id)
		assert.Equal(t, river.EventKindJobCompleted, ev.Kind)
		require.NotNil(t, ev.Job.AttemptedAt)
		assert.False(t, ev.Job.AttemptedAt.Before(scheduled), "the second attempt ran when due, not before")
	})

	t.Run("final is discarded and dead-lettered, and redrives", func(t *testing.T) {
		id := insert("always", &river.InsertOpts{MaxAttempts: 2})
		ev := waitEvent(t, events, id)
		require.Equal(t, river.EventKindJobFailed, ev.Kind)
		ev = waitEvent(t, events, id)
		require.Equal(t, river.EventKindJobFailed, ev.Kind)
		assert.Equal(t, rivertype.JobStateDiscarded, ev.Job.State)

		pending, err := sink.Pending(ctx)
		require.NoError(t, err)
		require.Len(t, pending, 1)
		dl := pending[0]
		assert.Equal(t, "retryriver_outcome", dl.Name)
		assert.JSONEq(t, `{"mode":"always","note":"order 42"}`, string(dl.Payload))
		assert.Equal(t, 2, dl.Attempts)
		assert.Equal(t, retry.OutcomeExhausted, dl.Reason)
		assert.Equal(t, retryriver.JobKey(ev.Job), dl.IdempotencyKey)
		require.Len(t, dl.Errors, 2)
		assert.Equal(t, []int{1, 2}, []int{dl.Errors[0].Attempt, dl.Errors[1].Attempt})
		assert.Contains(t, dl.LastError, "downstream unavailable")

		// The cause is fixed: redrive inserts the job again, and it runs.
		inner.fixed.Store(true)
		redriver, err := retry.New(retry.WithMaxAttempts(1))
		require.NoError(t, err)
		rep, err := deadletter.Redrive(ctx, sink, redriver, retryriver.Reinsert(client, nil), nil)
		require.NoError(t, err)
		assert.Equal(t, 1, rep.Succeeded, "report: %+v", rep)
		pending, err = sink.Pending(ctx)
		require.NoError(t, err)
		assert.Empty(t, pending)
		jobs, err := client.JobList(ctx, river.NewJobListParams().Kinds("retryriver_outcome").First(100))
		require.NoError(t, err)
		var again int64
		for _, j := range jobs.Jobs {
			if j.ID > id {
				again = j.ID // the only job inserted after the discarded one
			}
		}
		require.NotZero(t, again, "the redriven job")
		if row := jobRow(t, client, again); row.State != rivertype.JobStateCompleted {
			ev = waitEvent(t, events, again)
			assert.Equal(t, river.EventKindJobCompleted, ev.Kind)
		}
		assert.JSONEq(t, `{"mode":"always","note":"order 42"}`, string(jobRow(t, client, again).EncodedArgs))
	})
}
