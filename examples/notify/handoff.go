package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryriver"
	"github.com/steadfast-go/retry/retrystats"
)

// The -river -handoff mode. Each notification is a River job of
// retryriver.HandOffArgs (kind retry_handoff) with no attempt made yet,
// the notification's JSON as payload and its key ("notify:" and its ID):
// a retryriver.HandOffWorker runs it as one call of Do, with the whole
// policy (attempts, backoff, the service's Retry-After, the budget, the
// idempotency store and the dead letters: the Retrier's WithDeadLetter).
// Short waits are waited in memory; a wait of handOffThreshold or more
// (every Retry-After, 1 to 3s) goes back to River as a new job due at its
// end, carrying the attempts made, which any process's HandOffWorker goes
// on with. On shutdown the process cancels HandOffOptions.Stopping before
// it stops its River client, so that the waits in progress go back to
// River at once instead of holding the stop.

// handOffName is the name of the notification calls: the work the
// HandOffWorker runs for their jobs.
const handOffName = "notify-push"

// handOffThreshold is the shortest wait handed back to River.
const handOffThreshold = time.Second

// handOffKey is a notification's idempotency key, as in process.
func handOffKey(id string) string { return "notify:" + id }

// handOffRun is the state of a -river -handoff run.
type handOffRun struct {
	rr *riverRun

	mu       sync.Mutex
	lost     int // first River attempts whose acknowledgement was lost
	finished int // River attempts of a notification's job here
}

// middleware loses the acknowledgement of the first River attempt of the
// notifications the seed picks, after their call succeeded, so that
// River works the job again and the store replays it.
func (h *handOffRun) middleware(ctx context.Context, row *rivertype.JobRow, doInner func(context.Context) error) error {
	err := doInner(ctx)
	var a retryriver.HandOffArgs
	_ = json.Unmarshal(row.EncodedArgs, &a)
	id, _ := strings.CutPrefix(a.Key, "notify:")
	h.mu.Lock()
	defer h.mu.Unlock()
	h.finished++
	if err == nil && a.Attempts == 0 && row.Attempt == 1 && row.MaxAttempts > 1 && h.rr.redeliv[id] {
		h.lost++
		return errAckLost
	}
	return err
}

// runHandOffJobs works the notifications of a -river -handoff run: see
// the comment at the top of the file. It is runRiver's second half.
func runHandOffJobs(ctx context.Context, cfg config, e env, pool *pgxpool.Pool, b *backends, observers []retry.Observer,
	stats *retrystats.Stats, rr *riverRun, jobs []*job, logger *slog.Logger) (summary, error) {
	schema := riverSchema(cfg)
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: schema, Logger: logger})
	if err != nil {
		return summary{}, err
	}
	h, err := retryriver.NewHandOff(inserter, &retryriver.HandOffOptions{MaxAttempts: maxAttempts})
	if err != nil {
		return summary{}, err
	}
	stopping, stopWaits := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWaits()
	base, err := newRetrier(deps{store: b.store, sink: b.sink, observers: observers, noBudget: cfg.noBudget})
	if err != nil {
		return summary{}, err
	}
	r, err := base.With(retry.WithName(handOffName),
		retry.WithHandOff(h, &retry.HandOffOptions{Threshold: handOffThreshold, Stopping: stopping}))
	if err != nil {
		return summary{}, err
	}
	push := &pushWorker{rr: rr}
	w, err := retryriver.NewHandOffWorker(r, map[string]func(context.Context, []byte) error{
		handOffName: func(ctx context.Context, payload []byte) error {
			var a pushArgs
			if err := json.Unmarshal(payload, &a); err != nil {
				return retry.Permanent(err)
			}
			return push.Work(ctx, &river.Job[pushArgs]{JobRow: &rivertype.JobRow{}, Args: a})
		},
	})
	if err != nil {
		return summary{}, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	ho := &handOffRun{rr: rr}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:            schema,
		Workers:           workers,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.workers}},
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Middleware:        []rivertype.Middleware{river.WorkerMiddlewareFunc(ho.middleware)},
		Logger:            logger,
	})
	if err != nil {
		return summary{}, err
	}
	fmt.Fprintf(e.stdout, "  hand-off       each job is one call of Do (retryriver.HandOffWorker); each wait of %v or more goes back to River as a job of kind %s\n", handOffThreshold, retryriver.HandOffKind)
	if err := client.Start(ctx); err != nil {
		return summary{}, fmt.Errorf("-river: starting the River client: %w", err)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		stopWaits() // the waits in progress go back to River at once
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return client.Stop(sctx)
	}
	defer stop()

	// Unique by args in every state, as without -handoff: the args hold
	// the notification (its ID holds the seed).
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		payload, err := json.Marshal(pushArgs{ID: j.ID, Type: j.Type, UserID: j.UserID, Message: j.Message})
		if err != nil {
			return summary{}, err
		}
		params[i] = river.InsertManyParams{
			Args:       retryriver.HandOffArgs{Name: handOffName, Key: handOffKey(j.ID), Payload: payload},
			InsertOpts: &river.InsertOpts{MaxAttempts: maxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: rivertype.JobStates()}},
		}
	}
	if err := insertJobs(ctx, client, params, e.stdout); err != nil {
		return summary{}, err
	}

	states, err := waitHandOffsFinal(ctx, pool, cfg)
	if err != nil {
		return summary{}, err
	}
	if err := stop(); err != nil {
		return summary{}, fmt.Errorf("-river: stopping the River client: %w", err)
	}
	delivered, twice, err := rr.svc.shared.counts(ctx, cfg.seed)
	if err != nil {
		return summary{}, err
	}
	snap := stats.Snapshot()
	s := summary{
		Jobs: len(jobs), Redelivered: ho.lost, Sent: rr.svc.deliveries.Load(), DeliveredTwice: rr.svc.duplicates.Load(),
		Deduplicated: rr.svc.deduped.Load(), Requests: rr.svc.requests.Load(),
		Attempts: snap.Attempts, Retries: snap.Retries, Succeeded: int(snap.Success), Permanent: int(snap.Permanent),
		Exhausted: int(snap.Exhausted + snap.MaxElapsed), Deadline: int(snap.Deadline), Refused: int(snap.Refused),
		Unknown: int(snap.Unknown), HandedOff: int(snap.HandedOff),
		DeadLettered: snap.DeadLettersRecorded, NotDeadLettered: snap.DeadLettersFailed,
		RiverCompleted: states.notifications["completed"], RiverCancelled: states.notifications["cancelled"], RiverDiscarded: states.notifications["discarded"],
		RiverDelivered: delivered, RiverTwice: twice, river: true,
	}
	fmt.Fprintln(e.stdout)
	fmt.Fprint(e.stdout, s.handOffTable(states, ho.finished))
	return s, nil
}

// handOffStates counts the jobs of a -river -handoff run by state: the
// notifications' own (no attempt made before) and the hand-offs.
type handOffStates struct {
	notifications, handOffs map[string]int
}

// waitHandOffsFinal waits until every notification of the seed is in
// River and every job of the seed, hand-offs included, is final.
func waitHandOffsFinal(ctx context.Context, pool *pgxpool.Pool, c config) (handOffStates, error) {
	table := pgx.Identifier{riverSchema(c), "river_job"}.Sanitize()
	prefix := handOffKey(fmt.Sprintf("job-%d-%%", c.seed))
	for {
		rows, err := pool.Query(ctx, "SELECT (args->>'attempts')::int = 0, state, count(*) FROM "+table+
			" WHERE kind = $1 AND args->>'key' LIKE $2 GROUP BY 1, 2", retryriver.HandOffKind, prefix)
		if err != nil {
			return handOffStates{}, fmt.Errorf("-river: %w", err)
		}
		st := handOffStates{notifications: map[string]int{}, handOffs: map[string]int{}}
		notifications, pending := 0, 0
		for rows.Next() {
			var first bool
			var state string
			var n int
			if err := rows.Scan(&first, &state, &n); err != nil {
				rows.Close()
				return handOffStates{}, err
			}
			if first {
				st.notifications[state] += n
				notifications += n
			} else {
				st.handOffs[state] += n
			}
			switch rivertype.JobState(state) {
			case rivertype.JobStateCompleted, rivertype.JobStateCancelled, rivertype.JobStateDiscarded:
			default:
				pending += n
			}
		}
		if err := rows.Err(); err != nil {
			return handOffStates{}, fmt.Errorf("-river: %w", err)
		}
		if notifications >= c.jobs && pending == 0 {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return handOffStates{}, fmt.Errorf("stopped: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// handOffTable renders the summary of a -river -handoff run.
func (s summary) handOffTable(st handOffStates, finished int) string {
	var b strings.Builder
	row := func(name string, v any, note string) { fmt.Fprintf(&b, "  %-28s%14v   %s\n", name, v, note) }
	total := func(m map[string]int) int { return m["completed"] + m["cancelled"] + m["discarded"] }
	row("jobs", s.Jobs, fmt.Sprintf("notifications; River attempts of their jobs here: %d, acknowledgements lost %d (River worked those again)", finished, s.Redelivered))
	row("notification jobs", total(st.notifications), fmt.Sprintf("every process's: %d completed, %d cancelled, %d discarded", st.notifications["completed"], st.notifications["cancelled"], st.notifications["discarded"]))
	row("hand-off jobs", total(st.handOffs), fmt.Sprintf("every process's waits of %v or more, given back to River: %d completed, %d cancelled, %d discarded", handOffThreshold, st.handOffs["completed"], st.handOffs["cancelled"], st.handOffs["discarded"]))
	row("sent", s.Sent, fmt.Sprintf("notifications the push service delivered for this process; %d for every process", s.RiverDelivered))
	row("calls", s.Succeeded+s.Permanent+s.Exhausted+s.Deadline+s.Refused+s.Unknown+s.HandedOff, fmt.Sprintf("calls of Do here: %d succeeded (replays included), %d handed off, %d permanent, %d exhausted, %d deadline, %d refused, %d unknown",
		s.Succeeded, s.HandedOff, s.Permanent, s.Exhausted, s.Deadline, s.Refused, s.Unknown))
	row("attempts", s.Attempts, fmt.Sprintf("here; %d of them retries (a resumed call's first attempt included)", s.Retries))
	row("dead-lettered", s.DeadLettered, fmt.Sprintf("by the Retrier's WithDeadLetter: the calls that gave up; %d could not be stored", s.NotDeadLettered))
	row("delivered twice", s.DeliveredTwice, fmt.Sprintf("by the push service's own count, of this process's deliveries; %d of every process's", s.RiverTwice))
	return b.String()
}
