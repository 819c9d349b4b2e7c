package retryriver_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/pgdeadletter"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/steadfast-go/retry/retryriver"
)

// The test binary re-runs itself as a worker process when helperEnv is
// set; TestMain hands it to runHelperProcess. The other variables tell
// the worker where its River schema and tables are.
const (
	helperEnv     = "RETRYRIVER_TEST_HELPER"
	mpSchemaEnv   = "RETRYRIVER_TEST_SCHEMA"
	mpIdemEnv     = "RETRYRIVER_TEST_IDEM_TABLE"
	mpSinkEnv     = "RETRYRIVER_TEST_SINK_TABLE"
	mpEffectsEnv  = "RETRYRIVER_TEST_EFFECTS_TABLE"
	mpProcEnv     = "RETRYRIVER_TEST_PROC"
	mpKind        = "retryriver_multiprocess"
	mpRedriven    = "redriven" // the queue of redriven jobs: their cause is fixed
	mpProcs       = 4
	mpJobs        = 1000
	mpMaxAttempts = 3
	mpPermanent   = 2  // % of attempts that fail for good
	mpTransient   = 30 // % of attempts that fail and are retried
	mpLost        = 5  // % of jobs whose first successful attempt's result is lost
)

type mpArgs struct {
	N int `json:"n"`
}

func (mpArgs) Kind() string { return mpKind }

// roll is a number in [0, 100) from a job's ID, its attempt and a salt:
// the same in every process and every run, whatever process works the
// job and whenever.
func roll(id int64, attempt int, salt uint64) int {
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(id))
	binary.LittleEndian.PutUint64(b[8:], uint64(attempt))
	binary.LittleEndian.PutUint64(b[16:], salt)
	h := sha256.Sum256(b[:]) // uniform in every bit, unlike FNV's low ones
	return int(binary.LittleEndian.Uint64(h[:8]) % 100)
}

// loses says whether the result of job id's first attempt is lost after
// its work succeeded, as when the process dies before River records it.
// Only a first attempt of a job with more loses it, so that River works
// the job again.
func loses(id int64, attempt, maxAttempts int) bool {
	return attempt == 1 && maxAttempts > 1 && roll(id, 0, 1) < mpLost
}

// predict is what becomes of job id of the default queue, whatever
// process works each attempt: its final state, its last attempt and
// whether its first result was lost.
func predict(id int64) (state rivertype.JobState, attempt int, lost bool) {
	for a := 1; a <= mpMaxAttempts; a++ {
		switch f := roll(id, a, 0); {
		case f < mpPermanent:
			return rivertype.JobStateCancelled, a, false
		case f < mpPermanent+mpTransient:
			if a == mpMaxAttempts {
				return rivertype.JobStateDiscarded, a, false
			}
		case loses(id, a, mpMaxAttempts):
			return rivertype.JobStateCompleted, a + 1, true // replayed by the store
		default:
			return rivertype.JobStateCompleted, a, false
		}
	}
	panic("unreachable")
}

var errResultLost = errors.New("the process died before River recorded the result")

// mpWorker fails as roll says, except in the redriven queue, and
// otherwise does its side effect: a row per job in the effects table,
// counting the runs of a job that is done again.
type mpWorker struct {
	river.WorkerDefaults[mpArgs]
	pool    *pgxpool.Pool
	effects string
	proc    int
}

func (w *mpWorker) Work(ctx context.Context, job *river.Job[mpArgs]) error {
	if job.Queue != mpRedriven {
		switch f := roll(job.ID, job.Attempt, 0); {
		case f < mpPermanent:
			return retry.Permanent(fmt.Errorf("job %d, attempt %d: card declined", job.ID, job.Attempt))
		case f < mpPermanent+mpTransient:
			return fmt.Errorf("job %d, attempt %d: downstream unavailable", job.ID, job.Attempt)
		}
	}
	_, err := w.pool.Exec(ctx, "INSERT INTO "+w.effects+" AS e (job_id, n, proc) VALUES ($1, $2, $3) "+
		"ON CONFLICT (job_id) DO UPDATE SET runs = e.runs + 1", job.ID, job.Args.N, w.proc)
	return err
}

// runHelperProcess runs the role the test binary was started for.
func runHelperProcess(role string) int {
	run, ok := map[string]func() error{
		"worker":  runWorkerProcess,
		"handoff": runHandOffProcess, // handoff_kill_test.go
		"resumer": runResumerProcess,
		"chaos":   runChaosProcess, // chaos_test.go
	}[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown helper role %q\n", role)
		return 2
	}
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "retryriver %s process: %v\n", role, err)
		return 1
	}
	return 0
}

// runWorkerProcess works the jobs of the schema the environment names
// through a Retrier with a pgstore and a pgdeadletter sink, as a service
// would; it prints "ready" once its River client runs, and stops it when
// its standard input closes.
func runWorkerProcess() error {
	ctx := context.Background()
	proc, err := strconv.Atoi(os.Getenv(mpProcEnv))
	if err != nil {
		return err
	}
	url, _ := pgdltest.URL()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	store, err := pgstore.New(pool, &pgstore.Options{Table: os.Getenv(mpIdemEnv)})
	if err != nil {
		return err
	}
	sink, err := pgdeadletter.New(pool, &pgdeadletter.Options{Table: os.Getenv(mpSinkEnv)})
	if err != nil {
		return err
	}
	r, err := retry.New(retry.WithName("multiprocess"), retry.WithIdempotency(store, nil),
		retry.WithBackoff(retry.Constant(10*time.Millisecond)), retry.WithJitter(retry.NoJitter))
	if err != nil {
		return err
	}
	w, err := retryriver.Wrap[mpArgs](&mpWorker{pool: pool, effects: os.Getenv(mpEffectsEnv), proc: proc}, r,
		&retryriver.Options{DeadLetters: sink})
	if err != nil {
		return err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	lose := river.WorkerMiddlewareFunc(func(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
		err := doInner(ctx)
		if err == nil && job.Queue != mpRedriven && loses(job.ID, job.Attempt, job.MaxAttempts) {
			return errResultLost
		}
		return err
	})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:            os.Getenv(mpSchemaEnv),
		Workers:           workers,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}, mpRedriven: {MaxWorkers: 5}},
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Middleware:        []rivertype.Middleware{lose},
		Logger:            slog.New(slog.DiscardHandler), // each failure is logged; the test reads the rows
		TestOnly:          true,
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	stop, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return client.Stop(stop)
}

// workerProcess is a running worker process; close stdin to stop it.
type workerProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
}

// startWorkers starts n worker processes on schema and the tables, and
// returns once each of them works jobs. Each is stopped when the test
// ends, if it was not before.
func startWorkers(t *testing.T, n int, env ...string) []*workerProcess {
	t.Helper()
	return startHelpers(t, "worker", n, env...)
}

// startHelpers starts n processes of the test binary in role, as
// startWorkers does; each must print "ready" first.
func startHelpers(t *testing.T, role string, n int, env ...string) []*workerProcess {
	t.Helper()
	procs := make([]*workerProcess, n)
	ready := make(chan error, n)
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), env...), helperEnv+"="+role, mpProcEnv+"="+strconv.Itoa(i))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		p := &workerProcess{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
		procs[i] = p
		go func() {
			lines := bufio.NewScanner(out)
			if lines.Scan() && lines.Text() == "ready" {
				ready <- nil
			} else {
				ready <- fmt.Errorf("%s process %d said %q (%v)", role, i, lines.Text(), lines.Err())
			}
			_, _ = io.Copy(io.Discard, out)
			p.done <- cmd.Wait()
		}()
		t.Cleanup(func() { p.stop(t) })
	}
	for range n {
		select {
		case err := <-ready:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("the %s processes were not ready within 30s", role)
		}
	}
	return procs
}

// stop closes p's input and waits for it to exit, which it must do
// cleanly within 15s; it kills it otherwise. It may be called again.
func (p *workerProcess) stop(t *testing.T) {
	t.Helper()
	if p.done == nil {
		return
	}
	_ = p.stdin.Close()
	select {
	case err := <-p.done:
		assert.NoError(t, err, "worker process %d", p.cmd.Process.Pid)
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("worker process %d did not stop within 15s", p.cmd.Process.Pid)
	}
	p.done = nil
}

// mpJob is a job's row as the test reads it.
type mpJob struct {
	id      int64
	n       int
	state   rivertype.JobState
	attempt int
	lost    bool // an attempt of the job failed with errResultLost
}

// finalJobs reads the jobs of queue, failing the test if they do not all
// reach a final state within d.
func finalJobs(t *testing.T, pool *pgxpool.Pool, schema, queue string, want int, d time.Duration) map[int64]mpJob {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(d)
	for {
		var total, pending int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE state NOT IN ('completed', 'cancelled', 'discarded')) FROM "+
			schema+".river_job WHERE queue = $1", queue).Scan(&total, &pending))
		if total == want && pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s: %d of %d jobs are not final after %v", queue, pending, total, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rows, err := pool.Query(ctx, "SELECT id, (args->>'n')::int, state, attempt, "+
		"EXISTS (SELECT FROM unnest(errors) e WHERE e->>'error' LIKE '%' || $2 || '%') FROM "+
		schema+".river_job WHERE queue = $1", queue, errResultLost.Error())
	require.NoError(t, err)
	jobs := map[int64]mpJob{}
	for rows.Next() {
		var j mpJob
		var state string
		require.NoError(t, rows.Scan(&j.id, &j.n, &state, &j.attempt, &j.lost))
		j.state = rivertype.JobState(state)
		jobs[j.id] = j
	}
	require.NoError(t, rows.Err())
	return jobs
}

// TestWorker_fourProcesses runs 1000 jobs on 4 worker processes that
// share a River schema, a pgstore idempotency table and a pgdeadletter
// sink on one database, as instances of a service do. Each attempt fails
// for good (2 %) or transiently (30 %) by a roll of the job's ID and
// attempt, so the fate of every job is known whatever process works it;
// and 5 % of the jobs lose the result of their first successful attempt
// after its side effect, as if the process died, so River works them
// again. Every job must end exactly once, as predicted: done (its side
// effect once), cancelled or discarded with one dead letter; none done
// twice, none lost. Then the dead letters redrive, and the jobs run.
func TestWorker_fourProcesses(t *testing.T) {
	pool := testPool(t)
	schema := riverSchema(t, pool)
	ctx := t.Context()
	idemTable, sinkTable, effects := pgdltest.Table(t, pool), pgdltest.Table(t, pool), pgdltest.Table(t, pool)
	store, err := pgstore.New(pool, &pgstore.Options{Table: idemTable})
	require.NoError(t, err)
	require.NoError(t, store.Migrate(ctx))
	sink, err := pgdeadletter.New(pool, &pgdeadletter.Options{Table: sinkTable})
	require.NoError(t, err)
	require.NoError(t, sink.Migrate(ctx))
	_, err = pool.Exec(ctx, "CREATE TABLE "+effects+" (job_id bigint PRIMARY KEY, n int NOT NULL, proc int NOT NULL, runs int NOT NULL DEFAULT 1)")
	require.NoError(t, err)

	start := time.Now()
	procs := startWorkers(t, mpProcs, mpSchemaEnv+"="+schema, mpIdemEnv+"="+idemTable, mpSinkEnv+"="+sinkTable, mpEffectsEnv+"="+effects)
	t.Logf("%d worker processes ready in %v", mpProcs, time.Since(start))

	// The test inserts and redrives with a client that works no jobs.
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: schema})
	require.NoError(t, err)
	params := make([]river.InsertManyParams, mpJobs)
	for i := range params {
		params[i] = river.InsertManyParams{Args: mpArgs{N: i}, InsertOpts: &river.InsertOpts{MaxAttempts: mpMaxAttempts}}
	}
	start = time.Now()
	_, err = client.InsertMany(ctx, params)
	require.NoError(t, err)

	jobs := finalJobs(t, pool, schema, river.QueueDefault, mpJobs, 60*time.Second)
	t.Logf("%d jobs final in %v", len(jobs), time.Since(start))

	// Every job ended as predicted, once.
	count := map[rivertype.JobState]int{}
	var lost int
	for _, j := range jobs {
		state, attempt, wasLost := predict(j.id)
		assert.Equal(t, state, j.state, "job %d", j.id)
		assert.Equal(t, attempt, j.attempt, "job %d: its last attempt", j.id)
		assert.Equal(t, wasLost, j.lost, "job %d: its first result was lost", j.id)
		count[j.state]++
		if j.lost {
			lost++
		}
	}
	t.Logf("completed %d (%d of them worked again after a lost result), cancelled %d, discarded %d",
		count[rivertype.JobStateCompleted], lost, count[rivertype.JobStateCancelled], count[rivertype.JobStateDiscarded])
	require.Len(t, jobs, mpJobs)
	for _, s := range []rivertype.JobState{rivertype.JobStateCompleted, rivertype.JobStateCancelled, rivertype.JobStateDiscarded} {
		assert.Positive(t, count[s], "no job ended %s: the rolls test nothing", s)
	}
	assert.Positive(t, lost, "no result was lost: the idempotency store is not put to the test")

	// The side effects: one per completed job, done once, none for the
	// others; each process did its share.
	done := map[int64]bool{}
	byProc := map[int]int{}
	rows, err := pool.Query(ctx, "SELECT job_id, proc, runs FROM "+effects)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		var proc, runs int
		require.NoError(t, rows.Scan(&id, &proc, &runs))
		assert.Equal(t, 1, runs, "job %d: its side effect ran %d times", id, runs)
		assert.Equal(t, rivertype.JobStateCompleted, jobs[id].state, "job %d has a side effect", id)
		done[id] = true
		byProc[proc]++
	}
	require.NoError(t, rows.Err())
	assert.Len(t, done, count[rivertype.JobStateCompleted], "a side effect per completed job")
	for i := range mpProcs {
		assert.Positive(t, byProc[i], "process %d did no job", i)
	}
	t.Logf("side effects per process: %v", byProc)

	// A dead letter per discarded job, none for the others.
	pending, err := sink.Pending(ctx)
	require.NoError(t, err)
	lettered := map[int64]bool{}
	byKey := map[string]int64{}
	for _, j := range jobs {
		byKey[retryriver.JobKey(&rivertype.JobRow{ID: j.id})] = j.id
	}
	for _, dl := range pending {
		id, ok := byKey[dl.IdempotencyKey]
		if !assert.True(t, ok, "dead letter %s has the key %q of no job", dl.ID, dl.IdempotencyKey) {
			continue
		}
		assert.False(t, lettered[id], "job %d has two dead letters", id)
		lettered[id] = true
		assert.Equal(t, rivertype.JobStateDiscarded, jobs[id].state, "job %d has a dead letter", id)
		assert.Equal(t, mpKind, dl.Name)
		assert.JSONEq(t, fmt.Sprintf(`{"n":%d}`, jobs[id].n), string(dl.Payload))
		assert.Equal(t, mpMaxAttempts, dl.Attempts)
		assert.Equal(t, retry.OutcomeExhausted, dl.Reason)
		assert.Len(t, dl.Errors, mpMaxAttempts)
	}
	assert.Len(t, lettered, count[rivertype.JobStateDiscarded], "a dead letter per discarded job")

	// Redrive: each dead letter is a job again, in a queue where the
	// cause is fixed, and it runs, once.
	redriver, err := retry.New(retry.WithMaxAttempts(1))
	require.NoError(t, err)
	start = time.Now()
	rep, err := deadletter.Redrive(ctx, sink, redriver, retryriver.Reinsert(client, &river.InsertOpts{Queue: mpRedriven}), nil)
	require.NoError(t, err)
	assert.Equal(t, len(pending), rep.Succeeded, "report: %+v", rep)
	again := finalJobs(t, pool, schema, mpRedriven, len(pending), 30*time.Second)
	t.Logf("%d dead letters redriven and their jobs completed in %v", len(again), time.Since(start))
	discardedN := map[int]bool{}
	for id := range lettered {
		discardedN[jobs[id].n] = true
	}
	for _, j := range again {
		assert.Equal(t, rivertype.JobStateCompleted, j.state, "redriven job %d", j.id)
		assert.True(t, discardedN[j.n], "redriven job %d has the args of no discarded job (n=%d)", j.id, j.n)
		delete(discardedN, j.n)
	}
	assert.Empty(t, discardedN, "discarded jobs that were not redriven")
	var effectsN, distinctN, twice int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT n), count(*) FILTER (WHERE runs > 1) FROM "+effects).Scan(&effectsN, &distinctN, &twice))
	assert.Equal(t, count[rivertype.JobStateCompleted]+len(again), effectsN, "a side effect per completed job, redriven ones included")
	assert.Equal(t, effectsN, distinctN, "no args done twice")
	assert.Zero(t, twice, "side effects done twice")
	pending, err = sink.Pending(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending, "dead letters left after the redrive")

	for _, p := range procs {
		p.stop(t)
	}
}
