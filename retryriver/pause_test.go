package retryriver_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/steadfast-go/retry/retryriver"
	"github.com/steadfast-go/retry/retrytest"
)

// mockPause returns a pause timed by a mock clock, so that a test sets
// and ends it without waiting: River's snoozes are in real time, so a
// job snoozed for the pause is made due again by the test (JobRetry).
func mockPause(t *testing.T) (*overload.Pause, *retrytest.Clock) {
	t.Helper()
	clk := retrytest.NewClock()
	p, err := overload.NewPause(overload.PauseOptions{Spread: time.Millisecond, Max: 3 * time.Hour, Clock: clk})
	require.NoError(t, err)
	return p, clk
}

// snoozesOf is the count of snoozes River keeps in a job's metadata.
func snoozesOf(t *testing.T, row *rivertype.JobRow) int {
	t.Helper()
	var m struct {
		Snoozes int `json:"snoozes"`
	}
	if len(row.Metadata) > 0 {
		require.NoError(t, json.Unmarshal(row.Metadata, &m))
	}
	return m.Snoozes
}

// dueAgain makes a snoozed job due now, as the end of its snooze would,
// and returns its next event.
func dueAgain(t *testing.T, client *river.Client[pgx.Tx], events <-chan *river.Event, id int64) *river.Event {
	t.Helper()
	_, err := client.JobRetry(t.Context(), id)
	require.NoError(t, err)
	return waitEvent(t, events, id)
}

// Under Wrap, a job whose attempt meets its Retrier's pause is snoozed
// for the pause's rest (spread included), not held in memory and not
// failed: River counts no attempt for it, and the wrapped worker does not
// run. It runs once the pause is over. A pause shorter than the job's
// timeout would hold the attempt in memory: Wrap hands the hold off as a
// snooze, as it does one that outlasts the timeout.
func TestWorker_pauseSnoozesTheJob(t *testing.T) {
	pool := testPool(t)
	p, clk := mockPause(t)
	sink := pgdltest.Sink(t, pool)
	dones := &doneLog{}
	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Pause: p, NoBudget: true}),
		retry.WithBackoff(retry.Constant(50*time.Millisecond)), retry.WithJitter(retry.NoJitter),
		retry.WithMaxDelay(100*time.Millisecond), // caps an After, not a pause
		retry.WithObserver(dones))
	require.NoError(t, err)
	inner := &outcomeWorker{returned: map[int64][]time.Time{}}
	w, err := retryriver.Wrap[outcomeArgs](inner, r, &retryriver.Options{DeadLetters: sink})
	require.NoError(t, err)
	client, events := pathClient(t, pool, w)
	insert := func(mode string, opts *river.InsertOpts) int64 {
		t.Helper()
		res, err := client.Insert(t.Context(), outcomeArgs{Mode: mode}, opts)
		require.NoError(t, err)
		return res.Job.ID
	}
	snoozed := func(t *testing.T, id int64, rest time.Duration) {
		t.Helper()
		before := time.Now()
		ev := waitEvent(t, events, id)
		require.Equal(t, river.EventKindJobSnoozed, ev.Kind, "errors: %v", ev.Job.Errors)
		assert.Zero(t, ev.Job.Attempt, "a snooze is no attempt")
		assert.Empty(t, ev.Job.Errors)
		assert.Equal(t, 1, snoozesOf(t, ev.Job))
		assert.Zero(t, inner.runs(id), "the wrapped worker ran while paused")
		assert.WithinRange(t, ev.Job.ScheduledAt, before.Add(rest-5*time.Second), time.Now().Add(rest+time.Second),
			"snoozed for the pause's rest, not capped by WithMaxDelay")
	}
	completes := func(t *testing.T, id int64) {
		t.Helper()
		ev := dueAgain(t, client, events, id)
		require.Equal(t, river.EventKindJobCompleted, ev.Kind, "errors: %v", ev.Job.Errors)
		assert.Equal(t, 1, ev.Job.Attempt, "the snooze cost no attempt")
		assert.Equal(t, 1, inner.runs(id))
	}

	t.Run("within the job's timeout", func(t *testing.T) {
		p.Extend(t.Context(), 30*time.Second) // River's job timeout is a minute
		id := insert("ok", &river.InsertOpts{MaxAttempts: 3})
		snoozed(t, id, 30*time.Second)
		clk.Add(31 * time.Second) // the pause is over
		completes(t, id)
		// Named by the job's kind, as the Retrier has no name.
		assert.Equal(t, []string{"retryriver_outcome " + retry.OutcomeHandedOff.String(), "retryriver_outcome success"}, dones.take())
	})

	t.Run("past the job's timeout", func(t *testing.T) {
		p.Extend(t.Context(), 2*time.Hour)
		id := insert("ok", &river.InsertOpts{MaxAttempts: 3})
		snoozed(t, id, 2*time.Hour)
		clk.Add(2*time.Hour + time.Second)
		completes(t, id)
		assert.Equal(t, []string{"retryriver_outcome " + retry.OutcomeHandedOff.String(), "retryriver_outcome success"}, dones.take())
	})

	t.Run("one job's server delay snoozes the others", func(t *testing.T) {
		first := insert("after", nil) // After(err, an hour): the pause is set
		ev := waitEvent(t, events, first)
		require.Equal(t, river.EventKindJobSnoozed, ev.Kind)
		assert.False(t, p.Until(t.Context()).IsZero(), "the job's After did not pause the others")
		other := insert("ok", nil)
		snoozed(t, other, time.Hour)
		clk.Add(time.Hour + time.Second)
		completes(t, other)
	})

	t.Run("a job out of snoozes fails as a refusal", func(t *testing.T) {
		// River's snoozes are bounded by the job's MaxAttempts, as an
		// After's are: then the refusal is a retryable failure, which
		// spends an attempt, and on the last one is dead-lettered.
		p.Extend(t.Context(), 2*time.Hour)
		defer clk.Add(2*time.Hour + time.Second)
		res, err := client.Insert(t.Context(), outcomeArgs{Mode: "ok", Note: "order 44"}, &river.InsertOpts{MaxAttempts: 1, Metadata: []byte(`{"snoozes":1}`)})
		require.NoError(t, err)
		ev := waitEvent(t, events, res.Job.ID)
		require.Equal(t, river.EventKindJobFailed, ev.Kind)
		assert.Equal(t, rivertype.JobStateDiscarded, ev.Job.State)
		require.Len(t, ev.Job.Errors, 1)
		assert.Contains(t, ev.Job.Errors[0].Error, overload.ErrPaused.Error())
		assert.Zero(t, inner.runs(res.Job.ID))
		pending, err := sink.Pending(t.Context())
		require.NoError(t, err)
		require.Len(t, pending, 1)
		assert.Equal(t, retry.OutcomeRefused, pending[0].Reason)
		assert.JSONEq(t, `{"mode":"ok","note":"order 44"}`, string(pending[0].Payload))
	})
}

// A job out of snoozes whose attempt meets a pause shorter than its
// timeout is held in memory, as Do holds a call, and runs when the pause
// ends: no attempt is spent on it.
func TestWorker_pauseHeldOnceOutOfSnoozes(t *testing.T) {
	pool := testPool(t)
	p, err := overload.NewPause(overload.PauseOptions{Spread: time.Millisecond})
	require.NoError(t, err)
	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Pause: p, NoBudget: true}))
	require.NoError(t, err)
	inner := &outcomeWorker{returned: map[int64][]time.Time{}}
	w, err := retryriver.Wrap[outcomeArgs](inner, r, nil)
	require.NoError(t, err)
	client, events := pathClient(t, pool, w)
	const pause = 200 * time.Millisecond
	p.Extend(t.Context(), pause)
	start := time.Now()
	res, err := client.Insert(t.Context(), outcomeArgs{Mode: "ok"}, &river.InsertOpts{MaxAttempts: 2, Metadata: []byte(`{"snoozes":2}`)})
	require.NoError(t, err)
	ev := waitEvent(t, events, res.Job.ID)
	require.Equal(t, river.EventKindJobCompleted, ev.Kind, "errors: %v", ev.Job.Errors)
	assert.Equal(t, 1, ev.Job.Attempt)
	assert.Equal(t, 2, snoozesOf(t, ev.Job), "no more snoozes")
	assert.GreaterOrEqual(t, inner.lastReturn(res.Job.ID).Sub(start), pause, "ran before the pause's end")
}

// doneLog records the name and outcome of each call that ends.
type doneLog struct {
	mu    sync.Mutex
	dones []string
}

func (*doneLog) OnAttemptStart(context.Context, retry.AttemptStart) {}
func (*doneLog) OnAttemptEnd(context.Context, retry.AttemptEnd)     {}
func (*doneLog) OnRetry(context.Context, retry.Scheduled)           {}
func (*doneLog) OnWaitEnd(context.Context, retry.WaitEnd)           {}
func (l *doneLog) OnDone(_ context.Context, e retry.Done) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dones = append(l.dones, e.Name+" "+e.Outcome.String())
}

// take returns the calls recorded since the last take.
func (l *doneLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.dones
	l.dones = nil
	return d
}
