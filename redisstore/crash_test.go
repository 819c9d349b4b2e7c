package redisstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
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
	crashKeys       = 50
)

var crashPayload = []byte(`{"order":7,"amount":1200}`)

func crashKey(i int) string { return "charge:order-" + strconv.Itoa(i) }

// runHelperProcess calls retry.Do on every crash key at once, with a fn
// that blocks until the process is killed. Once every fn runs, it prints
// for each key "<key index> <unix ns from before its Do>", then "ready".
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
	s, err := redisstore.New(c, &redisstore.Options{Prefix: os.Getenv(helperPrefixEnv)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	running := make(chan string)
	for i := range crashKeys {
		go func() {
			before := time.Now()
			err := retry.Do(context.Background(), func(context.Context) error {
				running <- fmt.Sprintf("%d %d", i, before.UnixNano())
				time.Sleep(time.Minute) // the parent kills us long before
				return nil
			}, retry.WithIdempotency(s, &retry.IdempotencyOptions{Key: crashKey(i), Lease: lease}), retry.WithPayload(crashPayload))
			fmt.Fprintln(os.Stderr, "helper was not killed:", err)
			os.Exit(3)
		}()
	}
	for range crashKeys {
		fmt.Println(<-running)
	}
	fmt.Println("ready")
	time.Sleep(time.Minute)
	return 3
}

// readHelper reads the helper's output up to "ready": for each key, the
// instant before which its lease cannot end. Every lease began after the
// instant the helper gives, on the same machine's clock; Redis keeps
// expiry in whole milliseconds, hence the 2ms of slack.
func readHelper(t *testing.T, out io.Reader, lease time.Duration) map[string]time.Time {
	t.Helper()
	expiry := map[string]time.Time{}
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "ready" {
		var i int
		var nanos int64
		_, err := fmt.Sscanf(lines.Text(), "%d %d", &i, &nanos)
		require.NoError(t, err, "helper said %q", lines.Text())
		expiry[crashKey(i)] = time.Unix(0, nanos).Add(lease - 2*time.Millisecond)
	}
	require.NoError(t, lines.Err())
	require.Len(t, expiry, crashKeys, "the helper stopped early")
	return expiry
}

// TestKilledHolderBlocksUntilLeaseExpires: a process SIGKILLed while its
// fn runs under a claim, for each of 50 keys, leaves the keys held until
// their lease runs out on the Redis server; no caller runs fn before that,
// and for each key exactly one of the callers waiting for it runs fn after.
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

	expiresNoEarlierThan := readHelper(t, out, lease)

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	err = cmd.Wait()
	require.Error(t, err)
	status, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, status.Signaled() && status.Signal() == syscall.SIGKILL, "helper ended with %v", err)

	// Two callers per key retry every 5ms while the key is held.
	const callersPerKey = 2
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		runs       = map[string][]time.Time{} // when fn started, per key
		heldEarly  int                        // attempts that found a key held before its lease could end
		errs       []error
		heldBefore = func(key string, at time.Time) {
			if at.Before(expiresNoEarlierThan[key]) {
				mu.Lock()
				heldEarly++
				mu.Unlock()
			}
		}
	)
	r, err := retry.New(retry.WithIdempotency(s, &retry.IdempotencyOptions{FailWhileHeld: true}), retry.WithPayload(crashPayload),
		retry.WithBackoff(retry.Constant(5*time.Millisecond)), retry.WithJitter(retry.NoJitter),
		retry.WithMaxAttempts(math.MaxInt), retry.WithMaxElapsed(10*time.Second),
		retry.WithObserver(inProgressObserver(heldBefore)))
	require.NoError(t, err)
	for i := range crashKeys {
		key := crashKey(i)
		ctx := retry.ContextWithIdempotencyKey(context.Background(), key)
		for range callersPerKey {
			wg.Go(func() {
				err := r.Do(ctx, func(context.Context) error {
					mu.Lock()
					runs[key] = append(runs[key], time.Now())
					mu.Unlock()
					return nil
				})
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()

	assert.Empty(t, errs)
	assert.Positive(t, heldEarly, "no caller looked before the lease ran out; the machine is too slow for this lease")
	assert.Len(t, runs, crashKeys)
	var first, last time.Duration
	for i := range crashKeys {
		key := crashKey(i)
		if !assert.Len(t, runs[key], 1, "key %q: fn must run exactly once after the lease", key) {
			continue
		}
		at, end := runs[key][0], expiresNoEarlierThan[key]
		assert.False(t, at.Before(end), "key %q: fn ran %v before the lease could end", key, end.Sub(at))
		since := at.Sub(end)
		if i == 0 || since < first {
			first = since
		}
		last = max(last, since)
	}
	t.Logf("%d keys: %d attempts found a key held before its lease could end; fn ran again %v to %v after that",
		crashKeys, heldEarly, first, last)
}

// inProgressObserver calls f with the key and time of each attempt that
// found the key held by another caller.
type inProgressObserver func(key string, at time.Time)

func (o inProgressObserver) OnAttemptEnd(ctx context.Context, e retry.AttemptEnd) {
	if errors.Is(e.Err, retry.ErrInProgress) {
		key, _ := retry.IdempotencyKeyFromContext(ctx)
		o(key, time.Now())
	}
}
func (inProgressObserver) OnAttemptStart(context.Context, retry.AttemptStart) {}
func (inProgressObserver) OnRetry(context.Context, retry.Scheduled)           {}
func (inProgressObserver) OnWaitEnd(context.Context, retry.WaitEnd)           {}
func (inProgressObserver) OnDone(context.Context, retry.Done)                 {}
