package pgdeadletter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/pgdeadletter"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two redrivers, each with its own pool as if in its own process, replay
// the same table at once: every record is replayed exactly once.
func TestRedriveConcurrentNeverReplaysTwice(t *testing.T) {
	const n = 200
	a := pgdltest.Sink(t, pgdltest.Pool(t))
	b, err := pgdeadletter.New(pgdltest.Pool(t), &pgdeadletter.Options{Table: a.Table()})
	require.NoError(t, err)
	t0 := time.Now()
	for i := range n {
		require.NoError(t, a.Put(t.Context(), record(fmt.Sprintf("id%03d", i), "op", retry.OutcomeExhausted, t0.Add(time.Duration(i)*time.Millisecond))))
	}

	var (
		mu       sync.Mutex
		replays  = map[string]int{}
		failures = map[string]bool{}
	)
	replay := func(dl retry.DeadLetter) error {
		mu.Lock()
		defer mu.Unlock()
		replays[dl.ID]++
		if dl.ID[len(dl.ID)-1] == '7' { // these fail again
			failures[dl.ID] = true
			return errors.New("still down")
		}
		return nil
	}
	// Each redriver's first replay waits for the other's, so both have
	// listed the pending records before either is done: they contend.
	started := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var once [2]sync.Once
	handler := func(i int) func(context.Context, retry.DeadLetter) error {
		return func(ctx context.Context, dl retry.DeadLetter) error {
			once[i].Do(func() { close(started[i]) })
			select {
			case <-started[1-i]:
			case <-ctx.Done():
				return ctx.Err()
			}
			return replay(dl)
		}
	}
	r, err := retry.New(retry.WithMaxAttempts(1))
	require.NoError(t, err)

	var wg sync.WaitGroup
	reports := make([]deadletter.Report, 2)
	errs := make([]error, 2)
	for i, src := range []*pgdeadletter.Sink{a, b} {
		wg.Go(func() { reports[i], errs[i] = deadletter.Redrive(t.Context(), src, r, handler(i), nil) })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])

	assert.Len(t, replays, n, "every record was replayed")
	for id, count := range replays {
		assert.Equal(t, 1, count, "record %s replayed %d times", id, count)
	}
	sum := reports[0].Succeeded + reports[1].Succeeded
	failed := reports[0].Failed + reports[1].Failed
	assert.Equal(t, n-len(failures), sum)
	assert.Equal(t, len(failures), failed)
	assert.Zero(t, reports[0].NotRecorded+reports[1].NotRecorded)
	assert.Equal(t, n, reports[0].Pending-reports[0].Skipped+reports[1].Pending-reports[1].Skipped,
		"marks: each record won by exactly one redriver")
	assert.Positive(t, reports[0].Skipped+reports[1].Skipped, "the redrivers contended for records")

	// The replays that failed again are new pending records that point
	// back to the old ones, which are all redriven.
	pending, err := a.List(t.Context(), deadletter.Filter{State: deadletter.Pending})
	require.NoError(t, err)
	require.Len(t, pending, len(failures))
	for _, dl := range pending {
		assert.True(t, failures[dl.RedriveOf], "new record %s points to a failed replay, not %q", dl.ID, dl.RedriveOf)
		assert.Equal(t, 1, dl.Redrives)
		assert.Equal(t, "key-"+dl.RedriveOf, dl.IdempotencyKey, "the replay keeps the idempotency key")
		assert.Equal(t, "still down", dl.LastError)
	}
	redriven, err := a.List(t.Context(), deadletter.Filter{State: deadletter.Redriven})
	require.NoError(t, err)
	assert.Len(t, redriven, n)
}
