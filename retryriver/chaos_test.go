package retryriver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgdeadletter"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/steadfast-go/retry/retryriver"
)

// The chaos test's settings. The calls' waits are server delays
// (retry.After) of 100ms to 20s, log-uniform, so that most are waited in
// memory and some are handed off far past River's job timeout.
const (
	chaosRiverURLEnv = "RETRYRIVER_TEST_CHAOS_RIVER_URL"
	chaosStoreURLEnv = "RETRYRIVER_TEST_CHAOS_STORE_URL"
	chaosAttemptsEnv = "RETRYRIVER_TEST_ATTEMPTS_TABLE"
	chaosEventsEnv   = "RETRYRIVER_TEST_EVENTS_FILE"
	chaosName        = "chaos-ship"
	chaosProcs       = 4
	chaosMaxAttempts = 6
	chaosThreshold   = time.Second
	chaosJobTimeout  = 5 * time.Second // River's: far below the longest waits
	chaosMinWait     = 100 * time.Millisecond
	chaosMaxWait     = 20 * time.Second
	chaosPermanent   = 3  // % of attempts that fail for good
	chaosTransient   = 35 // % of attempts that fail and wait
)

// chaosJobs is how many calls the chaos test hands to River: 2,000, or
// 500 under the race detector, which slows the 4 processes on CI's 2
// cores past the test's schedule.
func chaosJobs() int {
	if raceEnabled {
		return 500
	}
	return 2000
}

// chaosWait is the server delay after attempt of call n fails: 100ms to
// 20s, log-uniform, the same in every process.
func chaosWait(n, attempt int) time.Duration {
	u := float64(roll(int64(n), attempt, 7)) / 99
	return time.Duration(float64(chaosMinWait) * math.Pow(float64(chaosMaxWait/chaosMinWait), u))
}

// chaosPayload is call n's payload, which every job of its chain carries.
type chaosPayload struct {
	N int `json:"n"`
}

// attemptKey is the context key of the *chaosSlot of a River attempt.
type attemptKey struct{}

// chaosSlot is where the chaos worker's observer writes the attempt that
// starts, for fn to read, and fn the call's number, for the observer.
type chaosSlot struct{ attempt, n int }

// chaosObserver tells fn its attempt and logs to a file that outlives a
// kill -9 each wait of the threshold or more that a call makes in memory
// (its hand-off failed: "memory"), and each call that ended before a wait
// of the threshold or more for its deadline ("deadline"), as calls did
// before such waits were handed off whatever the deadline.
type chaosObserver struct {
	mu     sync.Mutex
	events *os.File
}

func (o *chaosObserver) OnAttemptStart(ctx context.Context, e retry.AttemptStart) {
	if slot, ok := ctx.Value(attemptKey{}).(*chaosSlot); ok {
		slot.attempt = e.Attempt
	}
}
func (*chaosObserver) OnAttemptEnd(context.Context, retry.AttemptEnd) {}
func (o *chaosObserver) OnRetry(_ context.Context, e retry.Scheduled) {
	if e.Delay >= chaosThreshold {
		o.log("memory", e.Delay)
	}
}
func (*chaosObserver) OnWaitEnd(context.Context, retry.WaitEnd) {}
func (o *chaosObserver) OnDone(ctx context.Context, e retry.Done) {
	slot, ok := ctx.Value(attemptKey{}).(*chaosSlot)
	if !ok || e.Outcome != retry.OutcomeDeadline || slot.attempt == 0 {
		return
	}
	f := roll(int64(slot.n), slot.attempt, 3)
	if d := chaosWait(slot.n, slot.attempt); f >= chaosPermanent && f < chaosPermanent+chaosTransient && d >= chaosThreshold {
		o.log("deadline", d)
	}
}

// log appends an event of kind about a wait of d.
func (o *chaosObserver) log(kind string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.events, "%s %d %d\n", kind, time.Now().UnixMilli(), d.Milliseconds())
	_ = o.events.Sync()
}

// runChaosProcess is a worker process of the chaos test: River and the
// dead letters on one PostgreSQL, the idempotency store on another, a
// HandOffWorker whose Retrier hands long waits back to River, and a
// shutdown that cancels Stopping before it stops the client.
func runChaosProcess() error {
	ctx := context.Background()
	proc, err := strconv.Atoi(os.Getenv(mpProcEnv))
	if err != nil {
		return err
	}
	riverPool, err := pgxpool.New(ctx, os.Getenv(chaosRiverURLEnv))
	if err != nil {
		return err
	}
	defer riverPool.Close()
	storePool, err := pgxpool.New(ctx, os.Getenv(chaosStoreURLEnv))
	if err != nil {
		return err
	}
	defer storePool.Close()
	store, err := pgstore.New(storePool, &pgstore.Options{Table: os.Getenv(mpIdemEnv)})
	if err != nil {
		return err
	}
	sink, err := pgdeadletter.New(riverPool, &pgdeadletter.Options{Table: os.Getenv(mpSinkEnv)})
	if err != nil {
		return err
	}
	events, err := os.OpenFile(os.Getenv(chaosEventsEnv), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer events.Close()
	schema := os.Getenv(mpSchemaEnv)
	inserter, err := river.NewClient(riverpgxv5.New(riverPool), &river.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	h, err := retryriver.NewHandOff(inserter, &retryriver.HandOffOptions{MaxAttempts: 10})
	if err != nil {
		return err
	}
	stopping, stop := context.WithCancel(ctx)
	defer stop()
	r, err := retry.New(retry.WithName("chaos-worker"), retry.WithMaxAttempts(chaosMaxAttempts), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}),
		retry.WithIdempotency(store, &retry.IdempotencyOptions{Lease: 5 * time.Second, StoreTimeout: time.Second}),
		// A hand-off may take up to the job's timeout: on CI's 2 cores
		// under -race an insert can outlast the default 2s while the
		// database is up, and the call would wait in memory.
		retry.WithHandOff(h, &retry.HandOffOptions{Threshold: chaosThreshold, Stopping: stopping, Timeout: chaosJobTimeout}),
		retry.WithDeadLetter(sink, nil), retry.WithObserver(&chaosObserver{events: events}),
		retry.WithBackoff(retry.Constant(chaosMinWait)), retry.WithMaxDelay(chaosMaxWait))
	if err != nil {
		return err
	}
	attempts, effects := os.Getenv(chaosAttemptsEnv), os.Getenv(mpEffectsEnv)
	w, err := retryriver.NewHandOffWorker(r, map[string]func(context.Context, []byte) error{
		chaosName: func(ctx context.Context, payload []byte) error {
			var p chaosPayload
			if err := json.Unmarshal(payload, &p); err != nil {
				return retry.Permanent(err)
			}
			attempt := 0
			if slot, ok := ctx.Value(attemptKey{}).(*chaosSlot); ok {
				attempt, slot.n = slot.attempt, p.N
			}
			if _, err := riverPool.Exec(ctx, "INSERT INTO "+attempts+" (n, attempt, proc) VALUES ($1, $2, $3)", p.N, attempt, proc); err != nil {
				return err
			}
			switch f := roll(int64(p.N), attempt, 3); {
			case f < chaosPermanent:
				return retry.Permanent(fmt.Errorf("call %d, attempt %d: card declined", p.N, attempt))
			case f < chaosPermanent+chaosTransient:
				return retry.After(fmt.Errorf("call %d, attempt %d: downstream busy", p.N, attempt), chaosWait(p.N, attempt))
			}
			key, _ := retry.IdempotencyKeyFromContext(ctx)
			_, err := riverPool.Exec(ctx, "INSERT INTO "+effects+" AS e (n, key, attempt, pid) VALUES ($1, $2, $3, $4) "+
				"ON CONFLICT (n) DO UPDATE SET runs = e.runs + 1", p.N, key, attempt, os.Getpid())
			return err
		},
	})
	if err != nil {
		return err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	slot := river.WorkerMiddlewareFunc(func(ctx context.Context, _ *rivertype.JobRow, doInner func(context.Context) error) error {
		return doInner(context.WithValue(ctx, attemptKey{}, &chaosSlot{}))
	})
	client, err := river.NewClient(riverpgxv5.New(riverPool), &river.Config{
		Schema:               schema,
		Workers:              workers,
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 20}},
		FetchCooldown:        5 * time.Millisecond,
		FetchPollInterval:    50 * time.Millisecond,
		JobTimeout:           chaosJobTimeout,
		RescueStuckJobsAfter: chaosJobTimeout + time.Second,
		Middleware:           []rivertype.Middleware{slot},
		Logger:               slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	// The shutdown: waits in progress go back to River at once, then the
	// client stops with nothing left to wait for.
	stop()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return client.Stop(sctx)
}

// kill9 kills p with SIGKILL and waits for it.
func (p *workerProcess) kill9(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Kill())
	<-p.done
	p.done = nil
}

// window is a time when River's database was down.
type window struct{ from, to time.Time }

// TestHandOff_chaos hands 2,000 calls to River (500 under the race
// detector) as a process's WithHandOff would after their first attempt,
// half with an idempotency key, and works them on 4 worker processes
// whose HandOffWorker resumes each call, fails it as a roll of its
// number and attempt says (3% for good, 35% with a server delay of 100ms
// to 20s), hands each wait of 1s or more back to River, and records
// every attempt and every side effect. Meanwhile two workers are killed
// -9 and restarted, River's PostgreSQL is killed -9 and restarted, the
// idempotency store's PostgreSQL refuses connections for 3s, the other
// two workers are killed -9 and restarted; then every worker shuts down,
// handing its waits in progress to River. No call may be lost: each is
// completed, dead-lettered or still in River; no keyed side effect
// happens twice; no attempt runs past WithMaxAttempts; and every wait of
// the threshold or more was handed off, whatever River's job timeout
// (5s), unless River's database was down.
func TestHandOff_chaos(t *testing.T) {
	riverDB, storeDB := pgdltest.StartServer(t), pgdltest.StartServer(t)
	ctx := t.Context()
	riverPool, err := pgxpool.New(ctx, riverDB.URL())
	require.NoError(t, err)
	t.Cleanup(riverPool.Close) // after the tables' and schema's cleanups
	storePool, err := pgxpool.New(ctx, storeDB.URL())
	require.NoError(t, err)
	t.Cleanup(storePool.Close)

	schema := riverSchema(t, riverPool)
	sinkTable, attempts, effects := pgdltest.Table(t, riverPool), pgdltest.Table(t, riverPool), pgdltest.Table(t, riverPool)
	sink, err := pgdeadletter.New(riverPool, &pgdeadletter.Options{Table: sinkTable})
	require.NoError(t, err)
	require.NoError(t, sink.Migrate(ctx))
	_, err = riverPool.Exec(ctx, "CREATE TABLE "+attempts+" (n int NOT NULL, attempt int NOT NULL, proc int NOT NULL)")
	require.NoError(t, err)
	_, err = riverPool.Exec(ctx, "CREATE TABLE "+effects+" (n int PRIMARY KEY, key text NOT NULL, attempt int NOT NULL, pid int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp(), runs int NOT NULL DEFAULT 1)")
	require.NoError(t, err)
	idemTable := pgdltest.Table(t, storePool)
	store, err := pgstore.New(storePool, &pgstore.Options{Table: idemTable})
	require.NoError(t, err)
	require.NoError(t, store.Migrate(ctx))
	eventsFile := filepath.Join(t.TempDir(), "long-waits")
	env := []string{chaosRiverURLEnv + "=" + riverDB.URL(), chaosStoreURLEnv + "=" + storeDB.URL(), mpSchemaEnv + "=" + schema,
		mpIdemEnv + "=" + idemTable, mpSinkEnv + "=" + sinkTable, chaosAttemptsEnv + "=" + attempts, mpEffectsEnv + "=" + effects,
		chaosEventsEnv + "=" + eventsFile}

	procs := startHelpers(t, "chaos", chaosProcs, env...)
	killed := map[int]bool{} // the pids killed -9
	restart := func(i int) {
		killed[procs[i].cmd.Process.Pid] = true
		procs[i].kill9(t)
		p := startHelpers(t, "chaos", 1, env...)[0]
		procs[i] = p
	}

	// The calls, handed off after their first attempt.
	jobs := chaosJobs()
	client, err := river.NewClient(riverpgxv5.New(riverPool), &river.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	params := make([]river.InsertManyParams, jobs)
	for n := range params {
		payload, _ := json.Marshal(chaosPayload{N: n})
		a := retryriver.HandOffArgs{Name: chaosName, Attempts: 1, Wait: chaosWait(n, 0), Payload: payload}
		if n%2 == 0 {
			a.Key = "order-" + strconv.Itoa(n)
		}
		params[n] = river.InsertManyParams{Args: a, InsertOpts: &river.InsertOpts{MaxAttempts: 10, ScheduledAt: time.Now().Add(a.Wait)}}
	}
	start := time.Now()
	_, err = client.InsertMany(ctx, params)
	require.NoError(t, err)
	at := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) }

	var down []window
	at(3 * time.Second)
	restart(0)
	restart(1)
	t.Logf("%v: workers 0 and 1 killed -9 and restarted", time.Since(start).Round(time.Millisecond))
	at(7 * time.Second)
	from := time.Now()
	riverDB.Kill9()
	time.Sleep(time.Second)
	riverDB.Start()
	down = append(down, window{from, time.Now()})
	t.Logf("%v: River's PostgreSQL killed -9 and restarted", time.Since(start).Round(time.Millisecond))
	at(13 * time.Second)
	storeDB.Stop()
	time.Sleep(3 * time.Second)
	storeDB.Start()
	t.Logf("%v: the idempotency store refused connections for 3s", time.Since(start).Round(time.Millisecond))
	at(19 * time.Second)
	restart(2)
	restart(3)
	t.Logf("%v: workers 2 and 3 killed -9 and restarted", time.Since(start).Round(time.Millisecond))
	at(35 * time.Second)
	for _, p := range procs {
		p.stop(t)
	}
	t.Logf("%v: the workers shut down", time.Since(start).Round(time.Millisecond))

	// Each call's fate, read from its side effect, its dead letters and
	// the jobs of its chain (by the payload every job carries).
	done := map[int]bool{}
	// A side effect done twice is one of the idempotency store's
	// documented cases when the process that did it first was killed -9
	// before the store had the outcome (its claim lapses with the lease),
	// or River's database went down as it was recorded (fn saw an error
	// although the row was in); any other is a fault.
	var twiceKeyed, twiceKeyless, twiceKilled int
	rows, err := riverPool.Query(ctx, "SELECT n, key, runs, pid, at FROM "+effects)
	require.NoError(t, err)
	for rows.Next() {
		var n, runs, pid int
		var key string
		var at time.Time
		require.NoError(t, rows.Scan(&n, &key, &runs, &pid, &at))
		done[n] = true
		inOutage := false
		for _, w := range down {
			inOutage = inOutage || at.After(w.from.Add(-time.Second)) && at.Before(w.to)
		}
		switch {
		case runs == 1:
		case killed[pid] || inOutage:
			twiceKilled++
		case strings.HasPrefix(key, "order-"):
			twiceKeyed++
		default:
			twiceKeyless++
		}
	}
	require.NoError(t, rows.Err())
	lettered, storeLettered := map[int]bool{}, map[int]bool{}
	letters, err := sink.Pending(ctx)
	require.NoError(t, err)
	var storeLetters int
	for _, dl := range letters {
		var p chaosPayload
		require.NoError(t, json.Unmarshal(dl.Payload, &p), "dead letter %s", dl.ID)
		if dl.Reason != retry.OutcomeUnknown && strings.Contains(dl.LastError, retry.ErrIdempotencyUnavailable.Error()) {
			// fn did not run, and River kept the job: no give-up, unless
			// River gave the job up at its last attempt (below). An
			// attempt that a failed renewal cut off names the store's
			// error too, but fn ran: its unknown outcome is a give-up.
			storeLetters++
			storeLettered[p.N] = true
			continue
		}
		lettered[p.N] = true
	}
	pending := map[int]bool{}
	bound := map[int]int{} // the attempts each call may make: see HandOffWorker
	var handOffs, running, maxRiverAttempt int
	states := map[int][]string{} // each call's jobs, for the log of a lost one
	jrows, err := riverPool.Query(ctx, "SELECT state, attempt, args FROM "+schema+".river_job")
	require.NoError(t, err)
	for jrows.Next() {
		var state string
		var attempt int
		var raw []byte
		require.NoError(t, jrows.Scan(&state, &attempt, &raw))
		handOffs++
		maxRiverAttempt = max(maxRiverAttempt, attempt)
		var a retryriver.HandOffArgs
		require.NoError(t, json.Unmarshal(raw, &a))
		var p chaosPayload
		require.NoError(t, json.Unmarshal(a.Payload, &p))
		bound[p.N] += attempt * max(1, chaosMaxAttempts-a.Attempts)
		states[p.N] = append(states[p.N], fmt.Sprintf("%s at River attempt %d, call attempts %d", state, attempt, a.Attempts))
		switch rivertype.JobState(state) {
		case rivertype.JobStateCompleted, rivertype.JobStateCancelled, rivertype.JobStateDiscarded:
		case rivertype.JobStateRunning:
			running++ // a killed worker's, for River's rescuer
			pending[p.N] = true
		default:
			pending[p.N] = true
		}
	}
	require.NoError(t, jrows.Err())
	handOffs -= jobs
	var lost []int
	var completed, deadLettered, scheduled int
	for n := range jobs {
		switch {
		case done[n]:
			completed++
		case lettered[n]:
			deadLettered++
		case pending[n]:
			scheduled++
		case storeLettered[n]:
			// River gave the job up after store failures at its last
			// attempt: the dead letter holds the work, for a redrive.
			deadLettered++
		default:
			lost = append(lost, n)
		}
	}

	// Attempts: none past WithMaxAttempts; per call, as many as the
	// redeliveries of its jobs allow.
	var maxAttempt, maxPerCall, overBound int
	require.NoError(t, riverPool.QueryRow(ctx, "SELECT coalesce(max(attempt), 0) FROM "+attempts).Scan(&maxAttempt))
	arows, err := riverPool.Query(ctx, "SELECT n, count(*) FROM "+attempts+" GROUP BY n")
	require.NoError(t, err)
	for arows.Next() {
		var n, c int
		require.NoError(t, arows.Scan(&n, &c))
		maxPerCall = max(maxPerCall, c)
		if c > 1+bound[n] { // the first attempt, made before the hand-off, is not logged
			overBound++
			t.Logf("call %d: %d attempts, more than the bound of %d", n, c, 1+bound[n])
		}
	}
	require.NoError(t, arows.Err())

	// The waits of the threshold or more made in memory, and the calls
	// that ended before one for their deadline: only while River's
	// database was down (a hand-off bounded by the job's timeout).
	var longInMemory, longDeadline, outsideOutage int
	if f, err := os.Open(eventsFile); err == nil {
		lines := bufio.NewScanner(f)
		for lines.Scan() {
			var kind string
			var ms, wait int64
			_, err := fmt.Sscan(lines.Text(), &kind, &ms, &wait)
			require.NoError(t, err, "event %q", lines.Text())
			if kind == "memory" {
				longInMemory++
			} else {
				longDeadline++
			}
			when := time.UnixMilli(ms)
			inside := false
			for _, w := range down {
				inside = inside || !when.Before(w.from) && when.Before(w.to.Add(10*time.Second))
			}
			if !inside {
				outsideOutage++
			}
		}
		f.Close()
	}

	t.Logf("calls %d: completed %d, dead-lettered %d, still in River %d (%d jobs running in killed workers, for the rescuer), lost %d",
		jobs, completed, deadLettered, scheduled, running, len(lost))
	t.Logf("hand-offs %d; side effects twice: keyed %d, key-less %d, after a kill -9 or outage %d; highest attempt %d (max %d), most attempts of one call %d, highest River attempt of a job %d",
		handOffs, twiceKeyed, twiceKeyless, twiceKilled, maxAttempt, chaosMaxAttempts, maxPerCall, maxRiverAttempt)
	t.Logf("waits of %v or more made in memory: %d, ended for the deadline before one: %d; %d of them outside River's outage; dead letters %d, %d of them for a store failure (the job went on)",
		chaosThreshold, longInMemory, longDeadline, outsideOutage, len(letters), storeLetters)
	if !assert.Empty(t, lost, "calls lost") {
		for _, n := range lost {
			rows, err := riverPool.Query(ctx, "SELECT id, state, attempt, args::text, errors::text[] FROM "+schema+".river_job WHERE args->>'payload' = $1",
				[]byte(fmt.Sprintf(`{"n":%d}`, n)))
			require.NoError(t, err)
			for rows.Next() {
				var id int64
				var state, args string
				var attempt int
				var errs []string
				require.NoError(t, rows.Scan(&id, &state, &attempt, &args, &errs))
				t.Logf("call %d: job %d %s attempt %d %s errors %v", n, id, state, attempt, args, errs)
			}
			var tries []int
			arows, err := riverPool.Query(ctx, "SELECT attempt FROM "+attempts+" WHERE n = $1", n)
			require.NoError(t, err)
			for arows.Next() {
				var a int
				require.NoError(t, arows.Scan(&a))
				tries = append(tries, a)
			}
			t.Logf("call %d: attempts %v; jobs %v", n, tries, states[n])
		}
	}
	assert.Zero(t, twiceKeyed, "keyed side effects done twice")
	assert.Zero(t, twiceKeyless, "key-less side effects done twice (they run under their job's key)")
	assert.LessOrEqual(t, maxAttempt, chaosMaxAttempts, "an attempt past WithMaxAttempts")
	assert.Zero(t, overBound, "calls with more attempts than their jobs' River attempts allow")
	assert.Zero(t, outsideOutage, "waits of the threshold or more made in memory, or ending the call for its deadline, while River's database was up")
	assert.Positive(t, handOffs, "no wait was handed off")
	assert.Positive(t, completed)
	assert.Positive(t, deadLettered)
}
