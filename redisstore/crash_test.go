package redisstore_test

import (
	"bufio"
	"context"
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
	helperKey       = "crash"
	helperFP        = "killed-holder"
)

// runHelperProcess claims helperKey, prints "claimed <unix ns before the
// claim>", and blocks until it is killed.
func runHelperProcess(role string) int {
	if role != "claim" {
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
	cl, err := s.Claim(context.Background(), helperKey, helperFP, lease)
	if err != nil || cl.Status != retry.ClaimAcquired {
		fmt.Fprintln(os.Stderr, "claim:", cl.Status, err)
		return 1
	}
	fmt.Printf("claimed %d\n", before.UnixNano())
	time.Sleep(time.Minute) // the parent kills us long before
	return 3
}

// TestKilledHolderBlocksUntilLeaseExpires: a process SIGKILLed while it
// holds a claim leaves the key held until the lease runs out on the Redis
// server; then exactly one of many concurrent callers takes it over.
func TestKilledHolderBlocksUntilLeaseExpires(t *testing.T) {
	s, _, prefix := newStore(t)
	const lease = 400 * time.Millisecond

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=claim", helperPrefixEnv+"="+prefix, helperLeaseEnv+"="+lease.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "helper output %q", line)
	ns, ok := strings.CutPrefix(strings.TrimSpace(line), "claimed ")
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

	// Callers poll until the key is theirs or completed. A caller that
	// acquires it runs the work (counted) and completes the key.
	const callers = 8
	var (
		wg                sync.WaitGroup
		mu                sync.Mutex
		runs, heldEarly   int
		acquiredTooEarly  []time.Duration
		unexpected        []string
		ctx               = context.Background()
		rec               = retry.Record{Value: []byte("rerun")}
		deadline          = time.Now().Add(5 * time.Second)
		pollEveryInterval = time.Millisecond
	)
	for range callers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				cl, err := s.Claim(ctx, helperKey, helperFP, time.Minute)
				returned := time.Now()
				mu.Lock()
				switch {
				case err != nil:
					unexpected = append(unexpected, err.Error())
				case cl.Status == retry.ClaimAcquired:
					runs++
					if returned.Before(expiresNoEarlierThan) {
						acquiredTooEarly = append(acquiredTooEarly, expiresNoEarlierThan.Sub(returned))
					}
				case cl.Status == retry.ClaimHeld:
					if cl.Fingerprint != helperFP {
						unexpected = append(unexpected, "held under "+cl.Fingerprint)
					}
					if returned.Before(expiresNoEarlierThan) {
						heldEarly++
					}
				}
				mu.Unlock()
				if err != nil {
					return
				}
				switch cl.Status {
				case retry.ClaimAcquired:
					if err := s.Complete(ctx, helperKey, cl.Token, rec, time.Minute); err != nil {
						mu.Lock()
						unexpected = append(unexpected, err.Error())
						mu.Unlock()
					}
					return
				case retry.ClaimCompleted:
					return
				}
				time.Sleep(pollEveryInterval)
			}
		})
	}
	wg.Wait()

	assert.Empty(t, unexpected)
	assert.Empty(t, acquiredTooEarly, "key taken over before the lease ran out")
	assert.Positive(t, heldEarly, "no caller looked before the lease ran out; the machine is too slow for this lease")
	assert.Equal(t, 1, runs, "exactly one caller re-runs the work after the lease")
	got, err := s.Claim(ctx, helperKey, helperFP, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, retry.Claim{Status: retry.ClaimCompleted, Fingerprint: helperFP, Record: rec}, got)
}
