package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryhttp"
	"github.com/steadfast-go/retry/retryriver"
	"github.com/steadfast-go/retry/retryslog"
	"github.com/steadfast-go/retry/retrystats"
)

// The -river mode. The jobs are River jobs (github.com/riverqueue/river)
// in the schema NAME_river of the -river database, migrated up on start
// (rivermigrate, idempotent), and a River client works them: its worker
// is retryriver.Wrap of the delivery (pushWorker), its RetryPolicy
// retryriver.NewPolicy of the same Retrier as the in-process mode (with
// the same pgstore idempotency table and, through Wrap, the pgdeadletter
// sink). River keeps the attempts and the waits between them, in real
// time: each River attempt is one call of the Retrier with one attempt.
//
// Every process started with the same -river URL, -namespace and -seed
// inserts the same jobs as unique River jobs (by args: the notification's
// ID), so they are inserted once, and works them beside the others. The
// idempotency key is the notification's own ("notify:" and its ID, as in
// process), so a job worked twice (its acknowledgement lost, see
// -redeliver-rate, or a rerun) replays its outcome instead of sending.
// The push service's record of deliveries is a table every process
// writes (NAME_push_deliveries), so "delivered twice" counts across
// processes. A process prints its summary when every job of the seed is
// final: completed, cancelled or discarded (and dead-lettered).

// pushKind is the River kind of a notification job.
const pushKind = "notify_push"

// pushArgs is a notification job's River args: the job's fields, whose
// JSON is the request body and the dead letter's payload.
type pushArgs struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	UserID  string `json:"user_id"`
	Message string `json:"message"`
}

func (pushArgs) Kind() string { return pushKind }

// errAckLost is the failure of a first attempt whose delivery succeeded
// but whose acknowledgement River never got (-redeliver-rate), as when
// the process dies first: River works the job again.
var errAckLost = errors.New("notify: the acknowledgement was lost after the send; River works the job again")

// errNoAnswer is an attempt whose answer would have come after the
// attempt timeout: the client gave up on it.
var errNoAnswer = fmt.Errorf("notify: no answer within the attempt timeout (%v)", attemptTimeout)

// riverSchema is the schema of the run's River tables.
func riverSchema(c config) string { return c.namespace + "_river" }

// pushDeliveriesTable is the push service's record of deliveries.
func pushDeliveriesTable(c config) string { return c.namespace + "_push_deliveries" }

// sharedDeliveries is the push service's record of deliveries, in
// PostgreSQL: one row per job delivered, with how many times.
type sharedDeliveries struct {
	pool  *pgxpool.Pool
	table string // sanitized
}

// deliver records a delivery of job id and returns how many the job has
// had, this one included; with dedup it delivers only a job never
// delivered, and returns 0 for the others.
func (d *sharedDeliveries) deliver(ctx context.Context, id string, dedup bool) (int, error) {
	if dedup {
		// The example's Idempotency-Key is the job ID.
		tag, err := d.pool.Exec(ctx, "INSERT INTO "+d.table+" (job_id, deliveries) VALUES ($1, 1) ON CONFLICT (job_id) DO NOTHING", id)
		if err != nil || tag.RowsAffected() == 0 {
			return 0, err
		}
		return 1, nil
	}
	var n int
	err := d.pool.QueryRow(ctx, "INSERT INTO "+d.table+" AS t (job_id, deliveries) VALUES ($1, 1) "+
		"ON CONFLICT (job_id) DO UPDATE SET deliveries = t.deliveries + 1 RETURNING deliveries", id).Scan(&n)
	return n, err
}

// riverRun is the state of a -river run that the in-process mode has not.
type riverRun struct {
	redeliv map[string]bool // by job ID
	base    http.RoundTripper
	url     string
	svc     *service

	mu       sync.Mutex
	results  []result
	finished int // jobs whose last attempt ran here
	lost     int // first attempts whose acknowledgement was lost
	retries  int // attempts River retries or snoozes
	dead     uint64
	notDead  uint64
}

// attemptSlot is what the delivery tells the middleware of one attempt.
type attemptSlot struct {
	called bool // the delivery ran: the idempotency store did not answer
	status int
}

type slotKey struct{}

// pushWorker delivers one notification: one request to the push service,
// whose answer it classifies as retryhttp does (400 and 404 permanent,
// 429's Retry-After a server's delay, other failures retryable). Wrap
// runs it through the Retrier.
type pushWorker struct {
	river.WorkerDefaults[pushArgs]
	rr *riverRun
}

func (w *pushWorker) Work(ctx context.Context, job *river.Job[pushArgs]) error {
	slot, _ := ctx.Value(slotKey{}).(*attemptSlot)
	if slot == nil {
		slot = &attemptSlot{}
	}
	slot.called = true
	body, err := json.Marshal(job.Args)
	if err != nil {
		return retry.Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.rr.url, bytes.NewReader(body))
	if err != nil {
		return retry.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(retryhttp.IdempotencyKeyHeader, job.Args.ID)
	resp, err := w.rr.base.RoundTrip(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The service's latency is not spent (this mode runs in real time,
	// without the virtual clock), but an answer later than the attempt
	// timeout is a timeout, as in process.
	if latency, err := time.ParseDuration(resp.Header.Get(latencyHeader)); err == nil && latency >= attemptTimeout {
		return errNoAnswer
	}
	slot.status = resp.StatusCode
	switch {
	case resp.StatusCode < 300:
		return nil
	case slices.Contains(permanentStatuses, resp.StatusCode):
		return retry.Permanent(&retryhttp.StatusError{StatusCode: resp.StatusCode, Permanent: true})
	case resp.StatusCode == http.StatusTooManyRequests:
		err := &retryhttp.StatusError{StatusCode: resp.StatusCode}
		if d, ok := retryhttp.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return retry.After(err, d)
		}
		return err
	default:
		return &retryhttp.StatusError{StatusCode: resp.StatusCode}
	}
}

// middleware loses the acknowledgement of the first attempts the seed
// picks, and records how each attempt ended.
func (rr *riverRun) middleware(ctx context.Context, row *rivertype.JobRow, doInner func(context.Context) error) error {
	slot := &attemptSlot{}
	err := doInner(context.WithValue(ctx, slotKey{}, slot))
	var args pushArgs
	_ = json.Unmarshal(row.EncodedArgs, &args)
	lost := err == nil && slot.called && row.Attempt == 1 && row.MaxAttempts > 1 && rr.redeliv[args.ID]
	if lost {
		err = errAckLost
	}
	rr.record(row, slot, err, lost)
	return err
}

// record counts one River attempt: a delivery when the job's turn ends
// here (its last attempt, or one whose acknowledgement was lost).
func (rr *riverRun) record(row *rivertype.JobRow, slot *attemptSlot, err error, lost bool) {
	res := result{delivery: 1, status: slot.status, elapsed: time.Since(row.CreatedAt)}
	res.done.Attempts = row.Attempt
	var (
		cancel *rivertype.JobCancelError
		snooze *rivertype.JobSnoozeError
	)
	rr.mu.Lock()
	defer rr.mu.Unlock()
	switch {
	case lost:
		rr.lost++
		res.done.Outcome = retry.OutcomeSuccess
	case err == nil && !slot.called:
		res.replayed = true
		if ackLost(row) {
			res.delivery = 2
		}
		rr.finished++
	case err == nil:
		res.done.Outcome = retry.OutcomeSuccess
		rr.finished++
	case errors.As(err, &cancel):
		res.done.Outcome = retry.OutcomePermanent
		rr.finished++
	case errors.As(err, &snooze), row.Attempt < row.MaxAttempts:
		rr.retries++
		return
	default:
		res.done.Outcome = retry.OutcomeExhausted
		if errors.Is(err, retry.ErrDeadLetterNotRecorded) {
			rr.notDead++
		} else {
			rr.dead++
		}
		rr.finished++
	}
	rr.results = append(rr.results, res)
}

// ackLost says whether an earlier attempt of job lost its
// acknowledgement.
func ackLost(row *rivertype.JobRow) bool {
	for _, e := range row.Errors {
		if strings.Contains(e.Error, errAckLost.Error()) {
			return true
		}
	}
	return false
}

// setupRiver migrates River's schema and the push service's table, one
// process at a time (a session advisory lock), as every process does.
func setupRiver(ctx context.Context, pool *pgxpool.Pool, c config, logger *slog.Logger) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("-river: %w", err)
	}
	defer conn.Release()
	h := fnv.New64a()
	h.Write([]byte("steadfast-go/retry examples/notify -river " + c.namespace))
	lock := int64(h.Sum64())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lock); err != nil {
		return fmt.Errorf("-river: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lock)
	schema := riverSchema(c)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return fmt.Errorf("-river: creating schema %s: %w", schema, err)
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema, Logger: logger})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("-river: migrating River's tables in schema %s: %w", schema, err)
	}
	table := pgx.Identifier{pushDeliveriesTable(c)}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+table+" (job_id text PRIMARY KEY, deliveries int NOT NULL)"); err != nil {
		return fmt.Errorf("-river: creating table %s: %w", pushDeliveriesTable(c), err)
	}
	if c.fresh {
		// Only with no other process at work: its jobs would go.
		if _, err := conn.Exec(ctx, "DELETE FROM "+pgx.Identifier{schema, "river_job"}.Sanitize()+" WHERE kind = $1", pushKind); err != nil {
			return fmt.Errorf("-fresh: %w", err)
		}
		if _, err := conn.Exec(ctx, "DELETE FROM "+table); err != nil {
			return fmt.Errorf("-fresh: %w", err)
		}
	}
	return nil
}

// runRiver is run with -river.
func runRiver(ctx context.Context, cfg config, e env) (summary, error) {
	started := time.Now()
	logOut := e.log
	if logOut == nil {
		f, err := openLog(cfg.logPath)
		if err != nil {
			return summary{}, err
		}
		defer f.Close()
		logOut = f
	}
	logger := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: cfg.logLevel}))

	pool, err := openPostgres(ctx, cfg.river)
	if err != nil {
		return summary{}, errors.New(strings.Replace(err.Error(), "-postgres", "-river", 1))
	}
	defer pool.Close()
	if err := setupRiver(ctx, pool, cfg, logger); err != nil {
		return summary{}, err
	}
	b, err := openBackends(ctx, cfg, true)
	if err != nil {
		return summary{}, err
	}
	defer b.close()

	stats := new(retrystats.Stats)
	observers := []retry.Observer{stats, retryslog.New(logger, &retryslog.Options{RetryLevel: slog.LevelDebug})}
	r := &runner{cfg: cfg, env: e, stats: stats}
	metricsURL := ""
	if cfg.metrics != "" || e.registry != nil {
		reg := e.registry
		if reg == nil {
			reg = prometheus.NewRegistry()
		}
		obs, err := newMetrics(reg, r.queueLen) // no queue of its own: River's is in the database
		if err != nil {
			return summary{}, err
		}
		observers = append(observers, obs)
		if cfg.metrics != "" {
			url, stop, err := serveMetrics(cfg.metrics, reg)
			if err != nil {
				return summary{}, err
			}
			defer stop()
			metricsURL = url
		}
	}
	// No WithDeadLetter: Wrap writes the dead letter of a job River
	// discards.
	if r.shared, err = newRetrier(deps{store: b.store, observers: observers, noBudget: cfg.noBudget}); err != nil {
		return summary{}, err
	}
	if r.svc, err = newService(cfg.seed, cfg.failRate, cfg.serviceDedup, cfg.deliveries); err != nil {
		return summary{}, err
	}
	r.svc.shared = &sharedDeliveries{pool: pool, table: pgx.Identifier{pushDeliveriesTable(cfg)}.Sanitize()}
	url, stopService, err := r.svc.start()
	if err != nil {
		return summary{}, err
	}
	defer stopService()
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = cfg.workers
	defer base.CloseIdleConnections()

	jobs := generateJobs(cfg.seed, cfg.jobs, cfg.permanentRate)
	rr := &riverRun{redeliv: map[string]bool{}, base: base, url: url + "/v1/push", svc: r.svc}
	for i := range redelivered(cfg.seed, jobs, cfg.redeliverRate) {
		rr.redeliv[jobs[i].ID] = true
	}

	if cfg.handOff {
		fmt.Fprintf(e.stdout, "notify: %d jobs in River, %d workers in this process, seed %d; transient failures %.0f%% of attempts, permanent %.0f%% of jobs, acknowledgements lost %.0f%%\n",
			cfg.jobs, cfg.workers, cfg.seed, 100*cfg.failRate, 100*cfg.permanentRate, 100*cfg.redeliverRate)
		fmt.Fprintf(e.stdout, "  river          schema %s (rivermigrate up on start): every process with this -river and -seed shares the jobs\n", riverSchema(cfg))
		fmt.Fprintf(e.stdout, "  push service   %s (simulated, on loopback; deliveries recorded in table %s, shared)\n", url, pushDeliveriesTable(cfg))
		fmt.Fprintf(e.stdout, "  idempotency    %s; key notify:<job ID>\n", b.storeName)
		fmt.Fprintf(e.stdout, "  dead letters   %s (the Retrier's WithDeadLetter)\n", b.sinkName)
		if metricsURL != "" {
			fmt.Fprintf(e.stdout, "  metrics        %s\n", metricsURL)
		}
		s, err := runHandOffJobs(ctx, cfg, e, pool, b, observers, stats, rr, jobs, logger)
		if err != nil {
			return summary{}, err
		}
		fmt.Fprintf(e.stdout, "\nran in %v of real time\n", time.Since(started).Round(time.Millisecond))
		return s, nil
	}
	w, err := retryriver.Wrap[pushArgs](&pushWorker{rr: rr}, r.shared, &retryriver.Options{
		DeadLetters: b.sink,
		Key: func(row *rivertype.JobRow) string {
			var a pushArgs
			_ = json.Unmarshal(row.EncodedArgs, &a)
			return "notify:" + a.ID // as in process: a job's key whatever runs it
		},
	})
	if err != nil {
		return summary{}, err
	}
	policy, err := retryriver.NewPolicy(r.shared)
	if err != nil {
		return summary{}, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	schema := riverSchema(cfg)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:            schema,
		Workers:           workers,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.workers}},
		RetryPolicy:       policy,
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Middleware:        []rivertype.Middleware{river.WorkerMiddlewareFunc(rr.middleware)},
		Logger:            logger,
	})
	if err != nil {
		return summary{}, err
	}

	fmt.Fprintf(e.stdout, "notify: %d jobs in River, %d workers in this process, seed %d; transient failures %.0f%% of attempts, permanent %.0f%% of jobs, acknowledgements lost %.0f%%\n",
		cfg.jobs, cfg.workers, cfg.seed, 100*cfg.failRate, 100*cfg.permanentRate, 100*cfg.redeliverRate)
	fmt.Fprintf(e.stdout, "  river          schema %s (rivermigrate up on start), kind %s: every process with this -river and -seed shares the jobs\n", schema, pushKind)
	fmt.Fprintf(e.stdout, "  push service   %s (simulated, on loopback; deliveries recorded in table %s, shared)\n", url, pushDeliveriesTable(cfg))
	fmt.Fprintf(e.stdout, "  time           real: River waits between attempts (retryriver.Policy); the service's latencies are not spent\n")
	fmt.Fprintf(e.stdout, "  idempotency    %s; key notify:<job ID>\n", b.storeName)
	fmt.Fprintf(e.stdout, "  dead letters   %s (retryriver.Wrap, for the discarded jobs)\n", b.sinkName)
	if metricsURL != "" {
		fmt.Fprintf(e.stdout, "  metrics        %s\n", metricsURL)
	}

	if err := client.Start(ctx); err != nil {
		return summary{}, fmt.Errorf("-river: starting the River client: %w", err)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return client.Stop(sctx)
	}
	defer stop()

	// Unique by args (the job's ID holds the seed) in every state: the
	// processes that insert the same jobs insert them once, and a rerun
	// none (River's default states would insert the cancelled and
	// discarded ones again; the dead letters redrive those).
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		params[i] = river.InsertManyParams{
			Args:       pushArgs{ID: j.ID, Type: j.Type, UserID: j.UserID, Message: j.Message},
			InsertOpts: &river.InsertOpts{MaxAttempts: maxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: rivertype.JobStates()}},
		}
	}
	if err := insertJobs(ctx, client, params, e.stdout); err != nil {
		return summary{}, err
	}

	states, err := waitFinal(ctx, pool, cfg)
	if err != nil {
		return summary{}, err
	}
	if err := stop(); err != nil {
		return summary{}, fmt.Errorf("-river: stopping the River client: %w", err)
	}
	delivered, twice, err := r.svc.shared.counts(ctx, cfg.seed)
	if err != nil {
		return summary{}, err
	}

	r.results = rr.results
	s := r.summarize(jobs)
	s.river = true
	s.Jobs, s.Redelivered, s.Retries = rr.finished, rr.lost, uint64(rr.retries)
	s.DeadLettered, s.NotDeadLettered = rr.dead, rr.notDead
	s.RiverCompleted, s.RiverCancelled, s.RiverDiscarded = states["completed"], states["cancelled"], states["discarded"]
	s.RiverDelivered, s.RiverTwice = delivered, twice
	fmt.Fprintln(e.stdout)
	fmt.Fprint(e.stdout, s.table())
	for _, err := range s.unhandled {
		fmt.Fprintln(e.stdout, "  unexpected error:", err)
	}
	if s.RiverDiscarded > 0 {
		fmt.Fprintf(e.stdout, "\nThe discarded jobs are dead letters (%s). From the repository root:\n  go run ./cmd/deadletters list %s\n", b.sinkName, b.where)
	}
	fmt.Fprintf(e.stdout, "\nran in %v of real time\n", time.Since(started).Round(time.Millisecond))
	return s, nil
}

// waitFinal waits until every job of the seed is in River and final, and

// insertJobs inserts params in chunks, each job unique by its args in
// every state, and says how many were new.
func insertJobs(ctx context.Context, client *river.Client[pgx.Tx], params []river.InsertManyParams, out io.Writer) error {
	inserted := 0
	for chunk := range slices.Chunk(params, 1000) {
		res, err := client.InsertMany(ctx, chunk)
		if err != nil {
			return fmt.Errorf("-river: inserting the jobs: %w", err)
		}
		for _, ir := range res {
			if !ir.UniqueSkippedAsDuplicate {
				inserted++
			}
		}
	}
	fmt.Fprintf(out, "  inserted       %d of the %d jobs (the others were in River already)\n", inserted, len(params))
	return nil
}

// counts reads how many of the run's notifications (its seed's) the
// shared service delivered, and how many of them more than once.
func (d *sharedDeliveries) counts(ctx context.Context, seed uint64) (delivered, twice int64, err error) {
	err = d.pool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE deliveries > 1) FROM "+d.table+" WHERE job_id LIKE $1",
		fmt.Sprintf("job-%d-%%", seed)).Scan(&delivered, &twice)
	return delivered, twice, err
}

// returns how many ended in each state.
func waitFinal(ctx context.Context, pool *pgxpool.Pool, c config) (map[string]int, error) {
	table := pgx.Identifier{riverSchema(c), "river_job"}.Sanitize()
	prefix := fmt.Sprintf("job-%d-%%", c.seed)
	for {
		rows, err := pool.Query(ctx, "SELECT state, count(*) FROM "+table+" WHERE kind = $1 AND args->>'id' LIKE $2 GROUP BY state", pushKind, prefix)
		if err != nil {
			return nil, fmt.Errorf("-river: %w", err)
		}
		states := map[string]int{}
		total, final := 0, 0
		for rows.Next() {
			var state string
			var n int
			if err := rows.Scan(&state, &n); err != nil {
				rows.Close()
				return nil, err
			}
			states[state] = n
			total += n
			switch rivertype.JobState(state) {
			case rivertype.JobStateCompleted, rivertype.JobStateCancelled, rivertype.JobStateDiscarded:
				final += n
			}
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("-river: %w", err)
		}
		if total >= c.jobs && final == total {
			return states, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stopped: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
