package retry_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/retrymetrics/metricstest"
	"github.com/steadfast-go/retry/retrystats"
	"github.com/steadfast-go/retry/retrytest"
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
func (r *waitRecorder) OnWaitEnd(_ context.Context, e retry.WaitEnd) {
	r.add("waitend %d delay=%v cut=%t", e.Attempt, e.Delay, e.Cut)
}
func (r *waitRecorder) OnDone(_ context.Context, e retry.Done) {
	r.add("done %s attempts=%d", e.Outcome, e.Attempts)
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
				"start 1 wait=0s", "retry 1 delay=1s", "waitend 1 delay=1s cut=false", "start 2 wait=1s",
				"retry 2 delay=2s", "waitend 2 delay=2s cut=false", "start 3 wait=2s",
				"done exhausted attempts=3",
			},
		},
		{
			name: "zero_delays", backoff: retry.Constant(0),
			want: []string{
				"start 1 wait=0s", "retry 1 delay=0s", "start 2 wait=0s", "retry 2 delay=0s", "start 3 wait=0s",
				"done exhausted attempts=3",
			},
		},
		{
			name: "cancelled_while_waiting", backoff: retry.Constant(time.Second), cancel: 500 * time.Millisecond,
			want: []string{"start 1 wait=0s", "retry 1 delay=1s", "waitend 1 delay=1s cut=true", "done canceled attempts=1"},
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

// TestObserver_waitEndOncePerAnnouncedWait: OnWaitEnd comes once after
// each OnRetry with a non-zero delay, when that wait ends: with Cut false
// when its timer fired, true when the call's context ended during it. A
// zero delay has none. A budget beside the observer hears of the same
// waits, the cut one included.
func TestObserver_waitEndOncePerAnnouncedWait(t *testing.T) {
	for _, withBudget := range []bool{false, true} {
		t.Run(fmt.Sprintf("budget=%t", withBudget), func(t *testing.T) {
			t.Parallel()
			clk := retrytest.NewClock()
			rec := &waitRecorder{}
			b := &countingBudget{allow: 10}
			schedule := []time.Duration{0, time.Second, 0, 2 * time.Second}
			opts := []retry.Option{retry.WithClock(clk), retry.WithObserver(rec), retry.WithMaxAttempts(9),
				retry.WithBackoff(retry.BackoffFunc(func(n int) time.Duration { return schedule[n-1] })),
				retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true})}
			if withBudget {
				opts = append(opts, retry.WithOverload(&retry.OverloadOptions{Budget: b}))
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- retry.Do(ctx, metricstest.Failing(99, nil), opts...) }()
			for _, want := range schedule {
				d := <-clk.Armed() // Do is about to block on the wait (0: none)
				require.Equal(t, want, d)
				if d == 2*time.Second {
					cancel() // the timer has not fired: the context ends the wait
				} else {
					clk.Add(d)
				}
			}
			require.ErrorIs(t, <-done, context.Canceled)
			assert.Equal(t, []string{
				"start 1 wait=0s", "retry 1 delay=0s",
				"start 2 wait=0s", "retry 2 delay=1s", "waitend 2 delay=1s cut=false",
				"start 3 wait=1s", "retry 3 delay=0s",
				"start 4 wait=0s", "retry 4 delay=2s", "waitend 4 delay=2s cut=true",
				"done canceled attempts=4",
			}, rec.events)
			if withBudget {
				b.mu.Lock()
				defer b.mu.Unlock()
				assert.Equal(t, 4, b.retries, "asked before every retry, zero delays included")
				assert.Equal(t, 2, b.waited, "given back every non-zero wait, the cut one included")
			}
		})
	}
}

// ruleGauges is an Observer that keeps the two gauges by the rule of the
// Observer doc, and does nothing else.
type ruleGauges struct{ inFlight, waiting atomic.Int64 }

func (g *ruleGauges) OnAttemptStart(_ context.Context, e retry.AttemptStart) {
	if e.Attempt == 1 {
		g.inFlight.Add(1)
	}
}
func (g *ruleGauges) OnAttemptEnd(context.Context, retry.AttemptEnd) {}
func (g *ruleGauges) OnRetry(_ context.Context, e retry.Scheduled) {
	if e.Delay > 0 {
		g.waiting.Add(1)
	}
}
func (g *ruleGauges) OnWaitEnd(context.Context, retry.WaitEnd) { g.waiting.Add(-1) }
func (g *ruleGauges) OnDone(_ context.Context, e retry.Done) {
	if e.Attempts > 0 {
		g.inFlight.Add(-1)
	}
}

// TestObserver_gaugeRule applies the Observer doc's rule to the events of
// real calls that end in every way a wait can, and before their first
// attempt: both gauges come back to 0, as the metrics observers' do.
func TestObserver_gaugeRule(t *testing.T) {
	t.Parallel()
	obs := &ruleGauges{}
	inFlight := func() float64 { return float64(obs.inFlight.Load()) }
	waiting := func() float64 { return float64(obs.waiting.Load()) }
	metricstest.Gauges(t, obs, inFlight, waiting)
	metricstest.Refusals(t, obs, inFlight, waiting)
	calls := []struct {
		name string
		ctx  func(context.Context) context.Context
		opts []retry.Option
	}{
		{"no attempt", func(ctx context.Context) context.Context {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return ctx
		}, nil},
		{"zero-delay retries", nil, []retry.Option{retry.WithBackoff(retry.Constant(0))}},
		{"stops before a wait", nil, []retry.Option{retry.WithBackoff(retry.Constant(time.Second)), retry.WithMaxElapsed(1500 * time.Millisecond)}},
		{"exhausted after waits", nil, []retry.Option{retry.WithBackoff(retry.Constant(time.Second)), retry.WithMaxAttempts(3)}},
	}
	for _, c := range calls {
		synctest.Test(t, func(t *testing.T) {
			ctx := t.Context()
			if c.ctx != nil {
				ctx = c.ctx(ctx)
			}
			_ = retry.Do(ctx, metricstest.Failing(9, nil), append(c.opts, retry.WithObserver(obs), retry.WithJitter(retry.NoJitter))...)
		})
		assert.Zero(t, obs.inFlight.Load(), c.name)
		assert.Zero(t, obs.waiting.Load(), c.name)
	}
}

// An idempotent call that waits for another holder of its key and is
// cancelled in that wait has no OnWaitEnd: no OnRetry announced the wait,
// so a gauge of waits would otherwise go below 0 for good.
func TestObserver_cancelledWhileWaitingForTheKeysHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &retrystats.Stats{}
		rec := &waitRecorder{}
		r := mustNew(t, retry.WithObserver(st), retry.WithObserver(rec),
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
		assert.Equal(t, []string{"start 1 wait=0s", "done canceled attempts=0", "done success attempts=1"}, rec.events,
			"the holder's attempt, the waiter's end without an attempt or a WaitEnd, the holder's end")
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
	r := mustNew(t, retry.WithObserver(st), retry.WithObserver(rec), retry.WithBackoff(retry.Constant(0)))
	calls := 0
	assert.PanicsWithValue(t, "bug", func() {
		_ = r.Do(context.Background(), func(context.Context) error {
			if calls++; calls == 2 {
				panic("bug")
			}
			return errTransient
		})
	})
	assert.Equal(t, []string{"start 1 wait=0s", "retry 1 delay=0s", "start 2 wait=0s", "done permanent attempts=2"}, rec.events)
	s := st.Snapshot()
	assert.Zero(t, s.InFlight, "calls in flight")
	assert.Zero(t, s.Waiting, "waits in progress")
}
