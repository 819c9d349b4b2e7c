package pgstore_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
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
// only the test named run, with role and env in its environment.
func startChild(t *testing.T, run, role string, env ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, bufio.NewScanner(out)
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

// childStore opens the store a child process was given.
func childStore(t *testing.T, opts ...pgstore.Option) *pgstore.Store {
	pool := newPool(t)
	store, err := pgstore.New(pool, append([]pgstore.Option{pgstore.WithTable(os.Getenv(tableEnv))}, opts...)...)
	require.NoError(t, err)
	return store
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

// TestChildHoldClaim is the child of TestKilledHolder: it claims the key,
// says so, and blocks until it is killed.
func TestChildHoldClaim(t *testing.T) {
	if os.Getenv(childEnv) != "hold" {
		t.Skip("runs only as a child process of TestKilledHolder")
	}
	store := childStore(t, pgstore.WithClock(sharedClock(t)))
	c, err := store.Claim(context.Background(), "order-1", "fp", time.Minute)
	require.NoError(t, err)
	require.Equal(t, retry.ClaimAcquired, c.Status)
	os.Stdout.WriteString("\nclaimed\n")
	time.Sleep(time.Hour) // killed long before
}

// TestKilledHolder kills a process with SIGKILL while it holds a claim.
// Its claim outlives it: nobody else gets the key before the lease ends,
// and exactly one caller gets it after. Both processes measure the lease
// on mock clocks set to the same instant, so nothing waits for it.
func TestKilledHolder(t *testing.T) {
	_, pool, table := newStore(t)
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	child, out := startChild(t, "TestChildHoldClaim", "hold",
		tableEnv+"="+table, clockEnv+"="+start.Format(time.RFC3339Nano))
	waitLine(t, out, "claimed")
	require.NoError(t, child.Process.Kill())
	err := child.Wait()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "killed")

	mock := clock.NewMock()
	mock.Set(start)
	store, err := pgstore.New(pool, pgstore.WithTable(table), pgstore.WithClock(mock))
	require.NoError(t, err)
	ctx := context.Background()
	mock.Add(time.Minute - time.Microsecond)
	held, err := store.Claim(ctx, "order-1", "fp", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, retry.ClaimHeld, held.Status, "the dead holder's lease still runs")

	mock.Add(time.Microsecond)
	results := make(chan retry.Claim, 8)
	for range cap(results) {
		go func() {
			c, err := store.Claim(ctx, "order-1", "fp", time.Minute)
			assert.NoError(t, err)
			results <- c
		}()
	}
	acquired := 0
	for range cap(results) {
		if c := <-results; c.Status == retry.ClaimAcquired {
			acquired++
		}
	}
	assert.Equal(t, 1, acquired, "exactly one caller takes over after the lease")
}
