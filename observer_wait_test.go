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
	"github.com/steadfast-go/retry/retrymetrics/metricstest"
)

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
