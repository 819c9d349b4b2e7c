package retryriver_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/steadfast-go/retry/retryriver"
)

// deadStore is a pgstore on a pool whose server refuses connections: a
// port of loopback that nothing listens on.
func deadStore(t *testing.T) *pgstore.Store {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	pool, err := pgxpool.New(t.Context(), "postgres://postgres@"+addr+"/test?connect_timeout=1")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s, err := pgstore.New(pool, nil)
	require.NoError(t, err)
	return s
}

// A store that refuses connections keeps fn from running, which is no
// outcome of the work: River keeps the hand-off job to work it again,
// where it used to cancel it (a row River deletes after 24 h).
func TestHandOffWorker_storeFailureGoesBackToRiver(t *testing.T) {
	pool := testPool(t)
	r, err := retry.New(retry.WithIdempotency(deadStore(t), &retry.IdempotencyOptions{StoreTimeout: 2 * time.Second}),
		retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
	require.NoError(t, err)
	ran := 0
	w, err := retryriver.NewHandOffWorker(r, map[string]func(context.Context, []byte) error{
		"ship": func(context.Context, []byte) error { ran++; return nil },
	})
	require.NoError(t, err)
	client, events := pathClient(t, pool, w)
	res, err := client.Insert(t.Context(), retryriver.HandOffArgs{Name: "ship", Attempts: 1, Key: "order-1"}, nil)
	require.NoError(t, err)
	ev := waitEvent(t, events, res.Job.ID)
	assert.Equal(t, river.EventKindJobFailed, ev.Kind, "the job was not left to River to retry")
	row := jobRow(t, client, res.Job.ID)
	assert.Contains(t, []rivertype.JobState{rivertype.JobStateRetryable, rivertype.JobStateAvailable, rivertype.JobStateRunning}, row.State)
	require.NotEmpty(t, row.Errors)
	assert.Contains(t, row.Errors[0].Error, retry.ErrIdempotencyUnavailable.Error())
	assert.NotContains(t, row.Errors[0].Error, "order-1", "the key is in the job's error")
	assert.Zero(t, ran)
}

// The same for a job of Wrap's Worker: River retries it at the Policy's
// time, and only its last attempt is dead-lettered.
func TestWorker_storeFailureGoesBackToRiver(t *testing.T) {
	pool := testPool(t)
	r, err := retry.New(retry.WithIdempotency(deadStore(t), &retry.IdempotencyOptions{StoreTimeout: 2 * time.Second}),
		retry.WithBackoff(retry.Constant(time.Millisecond)))
	require.NoError(t, err)
	sink := pgdltest.Sink(t, pool)
	w, err := retryriver.Wrap[orderArgs](&orderWorker{pool: pool, table: "never_used"}, r, &retryriver.Options{DeadLetters: sink})
	require.NoError(t, err)
	client, events := pathClient(t, pool, w)
	res, err := client.Insert(t.Context(), orderArgs{Order: "7"}, &river.InsertOpts{MaxAttempts: 2})
	require.NoError(t, err)
	ev := waitEvent(t, events, res.Job.ID)
	require.Equal(t, river.EventKindJobFailed, ev.Kind, "the first attempt did not go back to River")
	assert.Equal(t, rivertype.JobStateAvailable, ev.Job.State)
	ev = waitEvent(t, events, res.Job.ID)
	require.Equal(t, river.EventKindJobFailed, ev.Kind)
	assert.Equal(t, rivertype.JobStateDiscarded, ev.Job.State, "River's last attempt")
	pending, err := sink.Pending(t.Context())
	require.NoError(t, err)
	require.Len(t, pending, 1, "one dead letter, of the last attempt")
	assert.Equal(t, retry.OutcomeExhausted, pending[0].Reason)
	assert.Equal(t, 2, pending[0].Attempts)
}

// One HandOffWorker, with one idempotent Retrier, runs the jobs of keyed
// and key-less calls: a key-less one runs under the job's key, which
// used to fail as bad input (a Retrier with WithIdempotency refuses a
// call with no key) and cancel the job.
func TestHandOffWorker_keyedAndKeylessCalls(t *testing.T) {
	pool := testPool(t)
	r, err := retry.New(retry.WithIdempotency(idemStore(t, pool), nil), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
	require.NoError(t, err)
	var (
		mu   sync.Mutex
		keys []string
	)
	w, err := retryriver.NewHandOffWorker(r, map[string]func(context.Context, []byte) error{
		"ship": func(ctx context.Context, _ []byte) error {
			key, _ := retry.IdempotencyKeyFromContext(ctx)
			mu.Lock()
			defer mu.Unlock()
			keys = append(keys, key)
			return nil
		},
	})
	require.NoError(t, err)
	client, events := pathClient(t, pool, w)
	keyed, err := client.Insert(t.Context(), retryriver.HandOffArgs{Name: "ship", Attempts: 1, Key: "order-1"}, nil)
	require.NoError(t, err)
	require.Equal(t, river.EventKindJobCompleted, waitEvent(t, events, keyed.Job.ID).Kind)
	keyless, err := client.Insert(t.Context(), retryriver.HandOffArgs{Name: "ship", Attempts: 1}, nil)
	require.NoError(t, err)
	ev := waitEvent(t, events, keyless.Job.ID)
	require.Equal(t, river.EventKindJobCompleted, ev.Kind, "the key-less call's job: %v", ev.Job.Errors)
	assert.Equal(t, []string{"order-1", retryriver.JobKey(keyless.Job)}, keys)
}

// NewHandOff refuses a queue River refuses, which left every call waiting
// in memory as each insert failed; its verdict is River's on each name.
func TestNewHandOff_refusesQueueRiverRefuses(t *testing.T) {
	pool := testPool(t)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: riverSchema(t, pool), Logger: slog.New(slog.DiscardHandler), TestOnly: true})
	require.NoError(t, err)
	for _, q := range []string{"bad queue!", "Upper", "a__b", "-a", "a-", "a|b|c", "a_b-c", "handed-off", "q1", strings.Repeat("q", 64), strings.Repeat("q", 65)} {
		_, insertErr := client.Insert(t.Context(), retryriver.HandOffArgs{Name: "ship"}, &river.InsertOpts{Queue: q})
		_, err := retryriver.NewHandOff(client, &retryriver.HandOffOptions{Queue: q})
		if insertErr == nil {
			assert.NoError(t, err, "queue %q, which River takes", q)
			continue
		}
		require.ErrorIs(t, err, retry.ErrInvalidOption, "queue %q, which River refuses: %v", q, insertErr)
		assert.Contains(t, err.Error(), "HandOffOptions.Queue")
	}
	_, err = retryriver.NewHandOff(client, &retryriver.HandOffOptions{Queue: "bad queue!"})
	assert.EqualError(t, err, `retry: invalid option: retryriver.NewHandOff: HandOffOptions.Queue "bad queue!" is no River queue name: lowercase letters and digits, runs of which may be joined by one "_", "-" or "|"`)
}

// rawJob is a job of kind whose encoded args are given as they are.
type rawJob struct {
	kind string
	args string
}

func (j rawJob) Kind() string                 { return j.kind }
func (j rawJob) MarshalJSON() ([]byte, error) { return []byte(j.args), nil }

// A Wrap'd job whose args River cannot decode used to be discarded after
// its last attempt with no dead letter; the dead letter now holds its
// encoded args, and its error says why without quoting them.
func TestWorker_undecodableArgsAreDeadLettered(t *testing.T) {
	pool := testPool(t)
	r, err := retry.New()
	require.NoError(t, err)
	sink := pgdltest.Sink(t, pool)
	w, err := retryriver.Wrap[orderArgs](&orderWorker{pool: pool, table: "never_used"}, r, &retryriver.Options{DeadLetters: sink})
	require.NoError(t, err)
	client, events := pathClient(t, pool, w)
	const args = `{"order": 12345678, "fail": false}`
	res, err := client.Insert(t.Context(), rawJob{kind: orderArgs{}.Kind(), args: args}, &river.InsertOpts{MaxAttempts: 1})
	require.NoError(t, err)
	ev := waitEvent(t, events, res.Job.ID)
	require.Equal(t, river.EventKindJobFailed, ev.Kind)
	assert.Equal(t, rivertype.JobStateDiscarded, ev.Job.State)
	pending, err := sink.Pending(t.Context())
	require.NoError(t, err)
	require.Len(t, pending, 1, "the discarded job has no dead letter")
	dl := pending[0]
	assert.Equal(t, orderArgs{}.Kind(), dl.Name)
	assert.JSONEq(t, args, string(dl.Payload))
	assert.Equal(t, retry.OutcomePermanent, dl.Reason)
	assert.Contains(t, dl.LastError, "the job's args do not decode: a JSON number at byte")
	assert.NotContains(t, dl.LastError, "12345678", "the args are quoted in the error")
	redriven, err := retryriver.RedriveArgs(dl)
	require.NoError(t, err)
	assert.Equal(t, orderArgs{}.Kind(), redriven.Kind())
}

// A hand-off job whose args do not decode fails for good through the
// worker's Retrier, whose WithDeadLetter records it, and is cancelled,
// where River used to retry it 25 times and discard it unrecorded.
func TestHandOffWorker_undecodableArgsAreDeadLettered(t *testing.T) {
	pool := testPool(t)
	sink := pgdltest.Sink(t, pool)
	r, err := retry.New(retry.WithDeadLetter(sink, nil))
	require.NoError(t, err)
	w, err := retryriver.NewHandOffWorker(r, map[string]func(context.Context, []byte) error{
		"ship": func(context.Context, []byte) error { return nil },
	})
	require.NoError(t, err)
	client, events := pathClient(t, pool, w)
	const args = `{"name": "ship", "attempts": "two"}`
	res, err := client.Insert(t.Context(), rawJob{kind: retryriver.HandOffKind, args: args}, nil)
	require.NoError(t, err)
	ev := waitEvent(t, events, res.Job.ID)
	require.Equal(t, river.EventKindJobCancelled, ev.Kind)
	pending, err := sink.Pending(t.Context())
	require.NoError(t, err)
	require.Len(t, pending, 1)
	dl := pending[0]
	assert.Equal(t, retryriver.HandOffKind, dl.Name)
	assert.JSONEq(t, args, string(dl.Payload))
	assert.Equal(t, retry.OutcomePermanent, dl.Reason)
	assert.Contains(t, dl.LastError, "a JSON string at byte")
	assert.NotContains(t, dl.LastError, "two")
	redriven, err := retryriver.RedriveArgs(dl)
	require.NoError(t, err)
	assert.Equal(t, retryriver.HandOffKind, redriven.Kind())
}

// A HandOff on a database that does not answer (River's table locked by
// another transaction) returns when its context ends, so that the call
// goes on waiting in memory instead of hanging.
func TestHandOff_hungDatabaseEndsWithTheContext(t *testing.T) {
	pool := testPool(t)
	schema := riverSchema(t, pool)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler), TestOnly: true})
	require.NoError(t, err)
	h, err := retryriver.NewHandOff(client, nil)
	require.NoError(t, err)
	lock, err := pool.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = lock.Rollback(context.Background()) }()
	_, err = lock.Exec(t.Context(), "LOCK TABLE "+schema+".river_job IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = h.HandOff(ctx, retry.Waiting{Name: "ship", Attempts: 1, Wait: time.Minute, Due: time.Now().Add(time.Minute)})
	took := time.Since(start)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, took, 2*time.Second, "the insert held the call past its context")

	// Through Do: HandOffOptions.Timeout bounds the hand-off, and the
	// call waits in memory, then succeeds.
	r, err := retry.New(retry.WithName("ship"), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithBackoff(retry.Constant(5*time.Millisecond)),
		retry.WithHandOff(h, &retry.HandOffOptions{Threshold: time.Millisecond, Timeout: 200 * time.Millisecond}))
	require.NoError(t, err)
	calls := 0
	start = time.Now()
	require.NoError(t, r.Do(t.Context(), func(context.Context) error {
		if calls++; calls == 1 {
			return errDownstream
		}
		return nil
	}))
	assert.Equal(t, 2, calls)
	assert.Less(t, time.Since(start), 2*time.Second, "the hand-off held the call")
	require.NoError(t, lock.Rollback(t.Context()))
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM "+schema+".river_job").Scan(&n))
	assert.Zero(t, n, "the abandoned insert left a job")
}

// handOffArgsOf decodes a hand-off job's args.
func handOffArgsOf(t *testing.T, row *rivertype.JobRow) retryriver.HandOffArgs {
	t.Helper()
	var a retryriver.HandOffArgs
	require.NoError(t, json.Unmarshal(row.EncodedArgs, &a))
	return a
}

// handOffJobs lists the hand-off jobs of a schema, oldest first.
func handOffJobs(t *testing.T, client *river.Client[pgx.Tx]) []*rivertype.JobRow {
	t.Helper()
	res, err := client.JobList(t.Context(), river.NewJobListParams().Kinds(retryriver.HandOffKind).First(100))
	require.NoError(t, err)
	return res.Jobs
}

var errDownstream = errors.New("downstream unavailable")

// The README's recipe, scaled from minutes to a second: a hand-off
// threshold of River's job timeout (1s here, 1 minute by default) and a
// resumed call whose next wait is the threshold. The wait would end past
// the job's deadline, and the call used to stop there (OutcomeDeadline):
// River retried the job at the same attempt, a dead letter per River
// attempt, and nothing went back to the queue. The wait is handed off
// instead: the job completes and a new one holds the next attempt.
func TestHandOffWorker_waitPastTheJobTimeoutIsHandedOff(t *testing.T) {
	pool := testPool(t)
	sink := pgdltest.Sink(t, pool)
	schema := riverSchema(t, pool)
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler), TestOnly: true})
	require.NoError(t, err)
	h, err := retryriver.NewHandOff(inserter, &retryriver.HandOffOptions{MaxAttempts: 4})
	require.NoError(t, err)
	const jobTimeout = time.Second
	r, err := retry.New(retry.WithName("handoff-worker"), retry.WithDeadLetter(sink, nil), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithMaxAttempts(10),
		retry.WithHandOff(h, &retry.HandOffOptions{Threshold: jobTimeout}),
		retry.WithBackoff(retry.Constant(jobTimeout)), retry.WithJitter(retry.NoJitter))
	require.NoError(t, err)
	w, err := retryriver.NewHandOffWorker(r, map[string]func(context.Context, []byte) error{
		"ship": func(context.Context, []byte) error { return errDownstream },
	})
	require.NoError(t, err)
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client := startClient(t, pool, schema, workers, func(c *river.Config) {
		c.JobTimeout = jobTimeout
		c.Logger = slog.New(slog.DiscardHandler)
	})
	events, stop := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
	defer stop()
	res, err := client.Insert(t.Context(), retryriver.HandOffArgs{Name: "ship", Attempts: 1, Wait: jobTimeout}, &river.InsertOpts{MaxAttempts: 4})
	require.NoError(t, err)
	ev := waitEvent(t, events, res.Job.ID)
	require.Equal(t, river.EventKindJobCompleted, ev.Kind, "the resumed call's wait was not handed off: %v", ev.Job.Errors)
	assert.Equal(t, 1, ev.Job.Attempt)

	jobs := handOffJobs(t, client)
	require.Len(t, jobs, 2, "a hand-off job per wait")
	next := jobs[1]
	assert.Equal(t, retryriver.HandOffArgs{Name: "ship", Attempts: 2, Wait: jobTimeout}, handOffArgsOf(t, next))
	pending, err := sink.Pending(t.Context())
	require.NoError(t, err)
	assert.Empty(t, pending, "a call handed off is not dead-lettered")
}

// A worker process wires the Retrier's HandOffOptions.Stopping to its
// shutdown: closing it before the River client stops ends a wait in
// progress at once and hands it off, so Stop returns at once and the
// job completes, the next attempt waiting in River, instead of Stop
// waiting out the wait (or the job's context being cancelled).
func TestHandOffWorker_stoppingHandsOffTheWaitInProgress(t *testing.T) {
	pool := testPool(t)
	schema := riverSchema(t, pool)
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler), TestOnly: true})
	require.NoError(t, err)
	h, err := retryriver.NewHandOff(inserter, nil)
	require.NoError(t, err)
	stopping, stop := context.WithCancel(context.Background())
	defer stop()
	const wait = 30 * time.Second // under the threshold: waited in memory
	r, err := retry.New(retry.WithName("handoff-worker"), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithHandOff(h, &retry.HandOffOptions{Stopping: stopping}),
		retry.WithBackoff(retry.Constant(wait)), retry.WithJitter(retry.NoJitter))
	require.NoError(t, err)
	failed := make(chan struct{}, 1)
	w, err := retryriver.NewHandOffWorker(r, map[string]func(context.Context, []byte) error{
		"ship": func(context.Context, []byte) error {
			select {
			case failed <- struct{}{}:
			default:
			}
			return errDownstream
		},
	})
	require.NoError(t, err)
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema: schema, Workers: workers, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), TestOnly: true,
	})
	require.NoError(t, err)
	require.NoError(t, client.Start(t.Context()))
	res, err := client.Insert(t.Context(), retryriver.HandOffArgs{Name: "ship", Attempts: 1, Wait: time.Second}, nil)
	require.NoError(t, err)
	select {
	case <-failed:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not run within 10s")
	}
	time.Sleep(50 * time.Millisecond) // into the wait

	// The shutdown: Stopping first, then the client.
	start := time.Now()
	stop()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, client.Stop(ctx), "the client did not stop: the wait held its job")
	assert.Less(t, time.Since(start), 2*time.Second)

	row := jobRow(t, inserter, res.Job.ID)
	assert.Equal(t, rivertype.JobStateCompleted, row.State)
	jobs := handOffJobs(t, inserter)
	require.Len(t, jobs, 2)
	next := handOffArgsOf(t, jobs[1])
	assert.Equal(t, 2, next.Attempts)
	assert.WithinRange(t, time.Unix(0, 0).Add(next.Wait), time.Unix(0, 0).Add(wait-5*time.Second), time.Unix(0, 0).Add(wait), "the rest of the wait")
	assert.Equal(t, rivertype.JobStateScheduled, jobs[1].State)
	assert.WithinDuration(t, start.Add(wait), jobs[1].ScheduledAt, 5*time.Second, "due when the wait would have ended")
}
