package retryriver_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/steadfast-go/retry/retryriver"
)

// The call the kill test hands off: its wait is long enough to be handed
// off (hoThreshold) and short enough for a test in real time.
const (
	hoName      = "ship-order"
	hoKey       = "order-42"
	hoPayload   = `{"order":42}`
	hoThreshold = 500 * time.Millisecond
	hoWait      = 1500 * time.Millisecond
)

// A process hands a call's long wait off to River and is killed with
// SIGKILL while the job waits; two new processes with River clients
// start, one of them picks the job up at its scheduled time, and the
// call's side effect happens exactly once, at the call's second attempt.
func TestHandOff_survivesKill9(t *testing.T) {
	pool := testPool(t)
	schema := riverSchema(t, pool)
	ctx := t.Context()
	idemTable, effects := pgdltest.Table(t, pool), pgdltest.Table(t, pool)
	store, err := pgstore.New(pool, &pgstore.Options{Table: idemTable})
	require.NoError(t, err)
	require.NoError(t, store.Migrate(ctx))
	_, err = pool.Exec(ctx, "CREATE TABLE "+effects+" (key text PRIMARY KEY, attempt int NOT NULL, payload text NOT NULL, runs int NOT NULL DEFAULT 1)")
	require.NoError(t, err)
	env := []string{mpSchemaEnv + "=" + schema, mpIdemEnv + "=" + idemTable, mpEffectsEnv + "=" + effects}

	// The first process: its call's first attempt fails, and the wait
	// before the second is handed off.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), helperEnv+"=handoff", mpProcEnv+"=0")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // never closed: the process waits on it until killed
	require.NoError(t, err)
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	said := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(out)
		lines.Scan()
		said <- lines.Text()
		_, _ = io.Copy(io.Discard, out)
	}()
	var line string
	select {
	case line = <-said:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("the hand-off process said nothing within 30s")
	}
	idText, ok := strings.CutPrefix(line, "handed-off ")
	if !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the hand-off process said %q", line)
	}
	id, err := strconv.ParseInt(idText, 10, 64)
	require.NoError(t, err)

	// Killed in the middle of the wait, the process leaves the job.
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.True(t, exit.Sys().(syscall.WaitStatus).Signaled(), "the process was not killed: %v", err)
	var (
		state       string
		scheduledAt time.Time
		attempt     int
	)
	require.NoError(t, pool.QueryRow(ctx, "SELECT state, scheduled_at, attempt FROM "+schema+".river_job WHERE id = $1", id).
		Scan(&state, &scheduledAt, &attempt))
	require.Equal(t, "scheduled", state, "the job is not waiting for its time")
	assert.Zero(t, attempt)
	require.True(t, time.Now().Before(scheduledAt), "the job was due before the process was killed: the test is too slow for its wait of %v", hoWait)
	assert.Zero(t, effectRows(t, pool, effects))

	// Two new processes work the queue; one picks the job up at its time.
	procs := startHelpers(t, "resumer", 2, env...)
	deadline := time.Now().Add(10 * time.Second)
	var attemptedAt *time.Time
	for {
		require.NoError(t, pool.QueryRow(ctx, "SELECT state, attempted_at FROM "+schema+".river_job WHERE id = $1", id).
			Scan(&state, &attemptedAt))
		if state == "completed" {
			break
		}
		require.Contains(t, []string{"scheduled", "available", "running"}, state)
		require.True(t, time.Now().Before(deadline), "the job is %s 10s after the resumers started", state)
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range procs {
		p.stop(t)
	}
	require.NotNil(t, attemptedAt)
	assert.False(t, attemptedAt.Before(scheduledAt), "the job ran at %v, before its time %v", attemptedAt, scheduledAt)
	assert.Less(t, attemptedAt.Sub(scheduledAt), 2*time.Second, "the job ran late")

	// The side effect: once, at the call's second attempt, with its payload.
	require.Equal(t, 1, effectRows(t, pool, effects))
	var (
		effAttempt, runs int
		payload          string
	)
	require.NoError(t, pool.QueryRow(ctx, "SELECT attempt, payload, runs FROM "+effects+" WHERE key = $1", hoKey).
		Scan(&effAttempt, &payload, &runs))
	assert.Equal(t, 2, effAttempt, "the attempt count did not continue")
	assert.JSONEq(t, hoPayload, payload)
	assert.Equal(t, 1, runs, "the side effect happened more than once")
}

func effectRows(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

// helperPool opens a pool on the test server for a helper process, and
// the pgstore on its table.
func helperPool(ctx context.Context) (*pgxpool.Pool, *pgstore.Store, error) {
	url, _ := pgdltest.URL()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	store, err := pgstore.New(pool, &pgstore.Options{Table: os.Getenv(mpIdemEnv)})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, store, nil
}

// runHandOffProcess makes the call of the kill test: its first attempt
// fails, its wait is handed off to River with an insert-only client, and
// it prints "handed-off" and the job's ID, then waits to be killed.
func runHandOffProcess() error {
	ctx := context.Background()
	pool, store, err := helperPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema: os.Getenv(mpSchemaEnv), Logger: slog.New(slog.DiscardHandler), TestOnly: true,
	})
	if err != nil {
		return err
	}
	h, err := retryriver.NewHandOff(client, nil)
	if err != nil {
		return err
	}
	r, err := retry.New(retry.WithName(hoName), retry.WithPayload([]byte(hoPayload)), retry.WithIdempotency(store, nil),
		retry.WithHandOff(h, &retry.HandOffOptions{Threshold: hoThreshold}),
		retry.WithBackoff(retry.Constant(hoWait)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
	if err != nil {
		return err
	}
	err = r.Do(retry.ContextWithIdempotencyKey(ctx, hoKey), func(context.Context) error {
		return errors.New("downstream unavailable")
	})
	var handed *retry.HandedOff
	if !errors.As(err, &handed) {
		return fmt.Errorf("the call was not handed off: %w", err)
	}
	fmt.Println("handed-off", handed.ID)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// runResumerProcess works the hand-off jobs with a HandOffWorker whose
// work records the side effect in the effects table, with the attempt
// it ran in; it prints "ready" once its River client runs, and stops it
// when its standard input closes.
func runResumerProcess() error {
	ctx := context.Background()
	pool, store, err := helperPool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	var attempt atomic.Int64
	r, err := retry.New(retry.WithIdempotency(store, nil), retry.WithObserver(attemptSeen{&attempt}),
		retry.WithBackoff(retry.Constant(10*time.Millisecond)), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
	if err != nil {
		return err
	}
	effects := os.Getenv(mpEffectsEnv)
	w, err := retryriver.NewHandOffWorker(r, map[string]func(context.Context, []byte) error{
		hoName: func(ctx context.Context, payload []byte) error {
			key, _ := retry.IdempotencyKeyFromContext(ctx)
			_, err := pool.Exec(ctx, "INSERT INTO "+effects+" AS e (key, attempt, payload) VALUES ($1, $2, $3) "+
				"ON CONFLICT (key) DO UPDATE SET runs = e.runs + 1", key, attempt.Load(), string(payload))
			return err
		},
	})
	if err != nil {
		return err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:            os.Getenv(mpSchemaEnv),
		Workers:           workers,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 5}},
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Logger:            slog.New(slog.DiscardHandler),
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

// attemptSeen keeps the attempt that started last, for the work to
// record.
type attemptSeen struct{ n *atomic.Int64 }

func (a attemptSeen) OnAttemptStart(_ context.Context, e retry.AttemptStart) {
	a.n.Store(int64(e.Attempt))
}
func (attemptSeen) OnAttemptEnd(context.Context, retry.AttemptEnd) {}
func (attemptSeen) OnRetry(context.Context, retry.Scheduled)       {}
func (attemptSeen) OnWaitEnd(context.Context, retry.WaitEnd)       {}
func (attemptSeen) OnDone(context.Context, retry.Done)             {}
