package pgstore_test

import (
	"bufio"
	"context"
	"io"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Environment of a child process.
const (
	tableEnv = "PGSTORE_TEST_TABLE"
	clockEnv = "PGSTORE_TEST_CLOCK" // RFC 3339 time of the shared mock clock
)

// startChild runs this test binary again as a child process that runs
// only the test named run, with role and env in its environment. It
// returns the child's stdin and stdout.
func startChild(t *testing.T, run, role string, env ...string) (*exec.Cmd, io.Writer, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, in, bufio.NewScanner(out)
}

// waitLine reads the child's output until a line equal to want, and fails
// when the child ends first.
func waitLine(t *testing.T, sc *bufio.Scanner, want string) {
	t.Helper()
	var seen []string
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == want {
			return
		}
		seen = append(seen, sc.Text())
	}
	t.Fatalf("child ended before printing %q; it printed:\n%s", want, strings.Join(seen, "\n"))
}

// childStore opens the store a child process was given, and its pool.
func childStore(t *testing.T, opts *pgstore.Options) (*pgstore.Store, *pgxpool.Pool) {
	pool := newPool(t)
	store, err := pgstore.New(pool, withTable(opts, os.Getenv(tableEnv)))
	require.NoError(t, err)
	return store, pool
}

// sharedClock returns a mock clock set to the instant in clockEnv, so that
// parent and child agree on time.
func sharedClock(t *testing.T) *clock.Mock {
	at, err := time.Parse(time.RFC3339Nano, os.Getenv(clockEnv))
	require.NoError(t, err)
	mock := clock.NewMock()
	mock.Set(at)
	return mock
}

// TestChildHoldClaim is the child of TestKilledHolder: its retry.Do
// claims the key, and fn says so and blocks until the process is killed.
func TestChildHoldClaim(t *testing.T) {
	if os.Getenv(childEnv) != "hold" {
		t.Skip("runs only as a child process of TestKilledHolder")
	}
	store, _ := childStore(t, &pgstore.Options{Clock: sharedClock(t)})
	err := retry.Do(context.Background(), func(context.Context) error {
		os.Stdout.WriteString("\nclaimed\n")
		time.Sleep(time.Hour) // killed long before
		return nil
	}, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "order-1", Lease: time.Minute}))
	t.Errorf("Do returned %v; the process should have been killed", err)
}

// TestKilledHolder kills a process with SIGKILL while its Do holds a
// claim. The claim outlives it: no one runs the work again before the
// lease ends, and exactly one caller runs it after. Both processes measure
// the lease on mock clocks set to the same instant, so nothing waits for
// it.
func TestKilledHolder(t *testing.T) {
	_, pool, table := newStore(t, nil)
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	child, _, out := startChild(t, "TestChildHoldClaim", "hold",
		tableEnv+"="+table, clockEnv+"="+start.Format(time.RFC3339Nano))
	waitLine(t, out, "claimed")
	require.NoError(t, child.Process.Kill())
	err := child.Wait()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "killed")

	mock := clock.NewMock()
	mock.Set(start)
	store, err := pgstore.New(pool, &pgstore.Options{Table: table, Clock: mock})
	require.NoError(t, err)
	r, err := retry.New(
		retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "order-1", FailWhileHeld: true, Lease: time.Minute}),
		retry.WithBackoff(retry.Constant(time.Millisecond)),
		retry.WithJitter(retry.NoJitter),
	)
	require.NoError(t, err)
	var runs atomic.Int32
	fn := func(context.Context) (string, error) {
		runs.Add(1)
		return "charged", nil
	}
	ctx := context.Background()

	mock.Add(time.Minute - time.Microsecond)
	_, err = retry.DoValueOn(ctx, r, fn)
	assert.ErrorIs(t, err, retry.ErrInProgress, "the dead holder's lease still runs")
	assert.Equal(t, int32(0), runs.Load())

	mock.Add(time.Microsecond)
	waiting, err := r.With(retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "order-1", Lease: time.Minute}), retry.WithMaxAttempts(math.MaxInt))
	require.NoError(t, err)
	values := make(chan string, 8)
	for range cap(values) {
		go func() {
			v, err := retry.DoValueOn(ctx, waiting, fn)
			assert.NoError(t, err)
			values <- v
		}()
	}
	for range cap(values) {
		assert.Equal(t, "charged", <-values)
	}
	assert.Equal(t, int32(1), runs.Load(), "exactly one caller runs the work after the lease")
}
