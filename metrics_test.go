package retry_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/retrymetrics/metricstest"
	"github.com/steadfast-go/retry/retrystats"
)

// fanOut passes every event to each of its observers, in order.
type fanOut []retry.Observer

func (f fanOut) OnAttemptStart(ctx context.Context, e retry.AttemptStart) {
	for _, o := range f {
		o.OnAttemptStart(ctx, e)
	}
}
func (f fanOut) OnAttemptEnd(ctx context.Context, e retry.AttemptEnd) {
	for _, o := range f {
		o.OnAttemptEnd(ctx, e)
	}
}
func (f fanOut) OnRetry(ctx context.Context, e retry.Scheduled) {
	for _, o := range f {
		o.OnRetry(ctx, e)
	}
}
func (f fanOut) OnDone(ctx context.Context, e retry.Done) {
	for _, o := range f {
		o.OnDone(ctx, e)
	}
}

// waitRecorder notes the events that say when waits begin and end.
type waitRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *waitRecorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

func (r *waitRecorder) OnAttemptStart(_ context.Context, e retry.AttemptStart) {
	r.add("start %d wait=%v", e.Attempt, e.Wait)
}
func (r *waitRecorder) OnAttemptEnd(context.Context, retry.AttemptEnd) {}
func (r *waitRecorder) OnRetry(_ context.Context, e retry.Scheduled) {
	r.add("retry %d delay=%v", e.Attempt, e.Delay)
}
func (r *waitRecorder) OnDone(_ context.Context, e retry.Done) {
	r.add("done %s attempts=%d waited=%t", e.Outcome, e.Attempts, e.Waited)
}

func TestObserver_waitEvents(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		backoff retry.Backoff
		cancel  time.Duration // 0: never
		want    []string
	}{
		{
			name: "waits", backoff: retry.Linear(time.Second, time.Second, time.Minute),
			want: []string{
				"start 1 wait=0s", "retry 1 delay=1s", "start 2 wait=1s", "retry 2 delay=2s", "start 3 wait=2s",
				"done exhausted attempts=3 waited=false",
			},
		},
		{
			name: "zero_delays", backoff: retry.Constant(0),
			want: []string{
				"start 1 wait=0s", "retry 1 delay=0s", "start 2 wait=0s", "retry 2 delay=0s", "start 3 wait=0s",
				"done exhausted attempts=3 waited=false",
			},
		},
		{
			name: "cancelled_while_waiting", backoff: retry.Constant(time.Second), cancel: 500 * time.Millisecond,
			want: []string{"start 1 wait=0s", "retry 1 delay=1s", "done canceled attempts=1 waited=true"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &waitRecorder{}
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tc.cancel > 0 {
					time.AfterFunc(tc.cancel, cancel)
				}
				_ = retry.Do(ctx, metricstest.Failing(9, nil), retry.WithObserver(rec),
					retry.WithBackoff(tc.backoff), retry.WithJitter(retry.NoJitter))
			})
			assert.Equal(t, tc.want, rec.events)
		})
	}
}

// An idempotent call that waits for another holder of its key and is
// cancelled in that wait ends with Waited false: no OnRetry announced the
// wait, so a gauge of waits would otherwise go below 0 for good.
func TestObserver_cancelledWhileWaitingForTheKeysHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &retrystats.Stats{}
		rec := &waitRecorder{}
		r := mustNew(t, retry.WithObserver(fanOut{st, rec}),
			retry.WithIdempotency(memstore.New(nil), &retry.IdempotencyOptions{Key: "job-1"}))
		release := make(chan struct{})
		go func() { _ = r.Do(t.Context(), func(context.Context) error { <-release; return nil }) }()
		synctest.Wait() // the holder is in its attempt
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(50*time.Millisecond, cancel)
		err := r.Do(ctx, func(context.Context) error { return nil })
		assert.ErrorIs(t, err, context.Canceled)
		close(release)
		synctest.Wait()
		assert.Contains(t, rec.events, "done canceled attempts=0 waited=false")
		s := st.Snapshot()
		assert.Zero(t, s.Waiting, "waits in progress")
		assert.Zero(t, s.InFlight, "calls in flight")
	})
}

// A panic in fn ends the call for the observer too: its gauge of calls in
// flight comes back to 0, and the panic goes on to the caller.
func TestObserver_panicInFnEndsTheCall(t *testing.T) {
	st := &retrystats.Stats{}
	rec := &waitRecorder{}
	r := mustNew(t, retry.WithObserver(fanOut{st, rec}), retry.WithBackoff(retry.Constant(0)))
	calls := 0
	assert.PanicsWithValue(t, "bug", func() {
		_ = r.Do(context.Background(), func(context.Context) error {
			if calls++; calls == 2 {
				panic("bug")
			}
			return errTransient
		})
	})
	assert.Equal(t, []string{"start 1 wait=0s", "retry 1 delay=0s", "start 2 wait=0s", "done permanent attempts=2 waited=false"}, rec.events)
	s := st.Snapshot()
	assert.Zero(t, s.InFlight, "calls in flight")
	assert.Zero(t, s.Waiting, "waits in progress")
}
