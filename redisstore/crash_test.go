package redisstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/redisstore"
)

// The test binary re-runs itself as a helper process when helperEnv is
// set; TestMain hands it to runHelperProcess.
const (
	helperEnv       = "REDISSTORE_TEST_HELPER"
	helperPrefixEnv = "REDISSTORE_TEST_HELPER_PREFIX"
	helperLeaseEnv  = "REDISSTORE_TEST_HELPER_LEASE"
	crashKey        = "charge:order-7"
)

var crashPayload = []byte(`{"order":7,"amount":1200}`)

// runHelperProcess calls retry.Do on crashKey with a fn that prints
// "running <unix ns from before Do>" and blocks until the process is
// killed.
func runHelperProcess(role string) int {
	if role != "hold" {
		fmt.Fprintf(os.Stderr, "unknown helper role %q\n", role)
		return 2
	}
	lease, err := time.ParseDuration(os.Getenv(helperLeaseEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	addr, _ := redisAddr()
	c := redis.NewClient(&redis.Options{Addr: addr})
	s, err := redisstore.New(c, redisstore.WithPrefix(os.Getenv(helperPrefixEnv)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	before := time.Now()
	err = retry.Do(context.Background(), func(context.Context) error {
		fmt.Printf("running %d\n", before.UnixNano())
		time.Sleep(time.Minute) // the parent kills us long before
		return nil
	}, retry.WithIdempotency(s, crashKey), retry.WithIdempotencyLease(lease), retry.WithPayload(crashPayload))
	fmt.Fprintln(os.Stderr, "helper was not killed:", err)
	return 3
}

// TestKilledHolderBlocksUntilLeaseExpires: a process SIGKILLed while its
// fn runs under a claim leaves the key held until the lease runs out on
// the Redis server; no caller runs fn before that, and exactly one of the
// callers waiting for the key runs it after.
func TestKilledHolderBlocksUntilLeaseExpires(t *testing.T) {
	s, _, prefix := newStore(t)
	const lease = 400 * time.Millisecond

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=hold", helperPrefixEnv+"="+prefix, helperLeaseEnv+"="+lease.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "helper output %q", line)
	ns, ok := strings.CutPrefix(strings.TrimSpace(line), "running ")
	require.True(t, ok, "helper said %q", line)
	nanos, err := strconv.ParseInt(ns, 10, 64)
	require.NoError(t, err)
	// The lease began after this instant, on the same machine's clock; Redis
	// keeps expiry in whole milliseconds, hence the 2ms of slack.
	expiresNoEarlierThan := time.Unix(0, nanos).Add(lease - 2*time.Millisecond)

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	err = cmd.Wait()
	require.Error(t, err)
	status, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, status.Signaled() && status.Signal() == syscall.SIGKILL, "helper ended with %v", err)

	// Callers retry every millisecond while the key is held.
	const callers = 8
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		runs       []time.Time // when fn started
		heldEarly  int         // attempts that found the key held before the lease could end
		errs       []error
		ctx        = retry.ContextWithIdempotencyKey(context.Background(), crashKey)
		heldBefore = func(at time.Time) {
			if at.Before(expiresNoEarlierThan) {
				mu.Lock()
				heldEarly++
				mu.Unlock()
			}
		}
	)
	for range callers {
		wg.Go(func() {
			err := retry.Do(ctx, func(context.Context) error {
				mu.Lock()
				runs = append(runs, time.Now())
				mu.Unlock()
				return nil
			},
				retry.WithIdempotency(s, ""), retry.WithPayload(crashPayload),
				retry.WithBackoff(retry.Constant(time.Millisecond)), retry.WithJitter(retry.NoJitter),
				retry.WithMaxAttempts(retry.Unlimited), retry.WithMaxElapsed(5*time.Second),
				retry.WithObserver(inProgressObserver(heldBefore)))
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	assert.Empty(t, errs)
	require.Len(t, runs, 1, "exactly one caller runs fn again after the lease")
	assert.False(t, runs[0].Before(expiresNoEarlierThan), "fn ran %v before the lease could end", expiresNoEarlierThan.Sub(runs[0]))
	assert.Positive(t, heldEarly, "no caller looked before the lease ran out; the machine is too slow for this lease")
	t.Logf("%d attempts found the key held before the lease ended; fn ran again %v after the lease began",
		heldEarly, runs[0].Sub(expiresNoEarlierThan.Add(-lease)))
}

// inProgressObserver calls f with the time of each attempt that found
// the key held by another caller.
type inProgressObserver func(at time.Time)

func (o inProgressObserver) OnAttemptEnd(_ context.Context, e retry.AttemptEnd) {
	if errors.Is(e.Err, retry.ErrInProgress) {
		o(time.Now())
	}
}
func (inProgressObserver) OnAttemptStart(context.Context, retry.AttemptStart) {}
func (inProgressObserver) OnRetry(context.Context, retry.RetryScheduled)      {}
func (inProgressObserver) OnDone(context.Context, retry.Done)                 {}
