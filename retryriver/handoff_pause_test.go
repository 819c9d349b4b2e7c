package retryriver_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retryriver"
)

// pausedHandOffWorker is a HandOffWorker whose Retrier has pause p, a
// hand-off at threshold and a dead-letter sink, under a River client of
// jobTimeout (0: River's, a minute); ran counts the runs of its work,
// "ship".
type pausedHandOffWorker struct {
	client *river.Client[pgx.Tx]
	events <-chan *river.Event
	sink   *deadletter.MemorySink
	ran    atomic.Int32
}

func newPausedHandOffWorker(t *testing.T, p *overload.Pause, threshold, jobTimeout time.Duration) *pausedHandOffWorker {
	t.Helper()
	pool := testPool(t)
	schema := riverSchema(t, pool)
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler), TestOnly: true})
	require.NoError(t, err)
	h, err := retryriver.NewHandOff(inserter, nil)
	require.NoError(t, err)
	pw := &pausedHandOffWorker{sink: deadletter.NewMemorySink()}
	r, err := retry.New(retry.WithName("handoff-worker"), retry.WithDeadLetter(pw.sink, nil), retry.WithIdempotency(idemStore(t, pool), nil),
		retry.WithOverload(&retry.OverloadOptions{Pause: p, NoBudget: true}),
		retry.WithHandOff(h, &retry.HandOffOptions{Threshold: threshold}))
	require.NoError(t, err)
	w, err := retryriver.NewHandOffWorker(r, map[string]func(context.Context, []byte) error{
		"ship": func(context.Context, []byte) error { pw.ran.Add(1); return nil },
	})
	require.NoError(t, err)
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	pw.client = startClient(t, pool, schema, workers, func(c *river.Config) {
		if jobTimeout > 0 {
			c.JobTimeout = jobTimeout
		}
	})
	events, stop := pw.client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
	t.Cleanup(stop)
	pw.events = events
	return pw
}

// A resumed call of a HandOffWorker that meets a pause at least the
// hand-off's threshold long is handed off again, as a long wait is: the
// job completes, a new one is due at the pause's end with the call's
// attempts as they were (none is spent on the pause), and the work runs
// once, from it, with nothing dead-lettered.
func TestHandOffWorker_pauseIsHandedOffAgain(t *testing.T) {
	p, clk := mockPause(t)
	w := newPausedHandOffWorker(t, p, time.Second, 0)
	client, events := w.client, w.events

	p.Extend(t.Context(), 30*time.Second) // under River's job timeout, a minute
	before := time.Now()
	args := retryriver.HandOffArgs{Name: "ship", Attempts: 2, Wait: time.Second, Key: "order-1", Payload: []byte(`{"order":1}`)}
	res, err := client.Insert(t.Context(), args, nil)
	require.NoError(t, err)
	ev := waitEvent(t, events, res.Job.ID)
	require.Equal(t, river.EventKindJobCompleted, ev.Kind, "errors: %v", ev.Job.Errors)
	assert.Zero(t, w.ran.Load(), "the work ran while paused")
	jobs := handOffJobs(t, client)
	require.Len(t, jobs, 2, "the pause was not handed off")
	next := handOffArgsOf(t, jobs[1])
	assert.Equal(t, 2, next.Attempts, "an attempt was spent on the pause")
	assert.Equal(t, "order-1", next.Key)
	assert.Equal(t, `{"order":1}`, string(next.Payload))
	assert.GreaterOrEqual(t, next.Wait, 30*time.Second)
	assert.WithinRange(t, jobs[1].ScheduledAt, before.Add(25*time.Second), time.Now().Add(31*time.Second), "due at the pause's end")

	clk.Add(31 * time.Second) // the pause is over
	ev = dueAgain(t, client, events, jobs[1].ID)
	require.Equal(t, river.EventKindJobCompleted, ev.Kind, "errors: %v", ev.Job.Errors)
	assert.Equal(t, int32(1), w.ran.Load())
	assert.Empty(t, w.sink.Records(), "nothing gave up")
}

// The README's recipe, a hand-off threshold of River's job timeout: a
// resumed call that meets a pause of the threshold or more should hand it
// off again, as it does a wait past the job's deadline
// (TestHandOffWorker_waitPastTheJobTimeoutIsHandedOff), rather than be
// refused (overload.ErrPaused), its job cancelled and the call
// dead-lettered.
func TestHandOffWorker_pausePastTheJobTimeoutIsHandedOffAgain(t *testing.T) {
	p, _ := mockPause(t)
	const jobTimeout = time.Second
	w := newPausedHandOffWorker(t, p, jobTimeout, jobTimeout)
	client, events := w.client, w.events
	p.Extend(t.Context(), 5*time.Second)
	res, err := client.Insert(t.Context(), retryriver.HandOffArgs{Name: "ship", Attempts: 2, Key: "order-2"}, nil)
	require.NoError(t, err)
	ev := waitEvent(t, events, res.Job.ID)
	require.Equal(t, river.EventKindJobCompleted, ev.Kind, "errors: %v", ev.Job.Errors)
	jobs := handOffJobs(t, client)
	require.Len(t, jobs, 2)
	assert.Equal(t, 2, handOffArgsOf(t, jobs[1]).Attempts)
	assert.Zero(t, w.ran.Load())
	assert.Empty(t, w.sink.Records())
}
