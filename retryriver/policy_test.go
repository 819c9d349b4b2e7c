package retryriver_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryriver"
)

// waits records the waits Do schedules.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) OnAttemptStart(context.Context, retry.AttemptStart) {}
func (w *waits) OnAttemptEnd(context.Context, retry.AttemptEnd)     {}
func (w *waits) OnDone(context.Context, retry.Done)                 {}
func (w *waits) OnWaitEnd(context.Context, retry.WaitEnd)           {}
func (w *waits) OnRetry(_ context.Context, s retry.Scheduled) {
	w.mu.Lock()
	w.d = append(w.d, s.Delay)
	w.mu.Unlock()
}

// TestPolicy_isDosSchedule checks that a job backs off exactly as Do
// does with the same policy: on a fixed random source, the Policy's wait
// after each attempt of a job is Do's after the same attempt.
func TestPolicy_isDosSchedule(t *testing.T) {
	for name, opts := range map[string][]retry.Option{
		"exponential, full jitter, capped": {retry.WithBackoff(retry.Exponential(time.Second, 2, time.Hour)), retry.WithMaxDelay(40 * time.Second)},
		"decorrelated":                     {retry.WithBackoff(retry.Decorrelated(time.Second, time.Minute))},
		"linear, proportional jitter":      {retry.WithBackoff(retry.Linear(time.Second, time.Second, time.Minute)), retry.WithJitter(retry.ProportionalJitter(0.2))},
	} {
		t.Run(name, func(t *testing.T) {
			const attempts = 10
			var want []time.Duration
			synctest.Test(t, func(t *testing.T) { // Do's waits take no real time
				rec := &waits{}
				r, err := retry.New(append(opts, retry.WithRandom(rand.NewPCG(7, 11)), retry.WithMaxAttempts(attempts),
					retry.WithObserver(rec), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))...)
				require.NoError(t, err)
				err = r.Do(t.Context(), func(context.Context) error { return errors.New("transient") })
				require.ErrorIs(t, err, retry.ErrExhausted)
				want = rec.d
			})
			require.Len(t, want, attempts-1)

			r, err := retry.New(append(opts, retry.WithRandom(rand.NewPCG(7, 11)))...)
			require.NoError(t, err)
			p, err := retryriver.NewPolicy(r)
			require.NoError(t, err)
			// The job's row as River passes it after each failed attempt:
			// the errors of the attempts before, and the time it was due.
			start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			job := &rivertype.JobRow{ID: 1, ScheduledAt: start}
			for i, w := range want {
				job.Attempt = i + 1
				got := p.Delay(job)
				assert.Equal(t, w, got, "the wait after attempt %d", i+1)
				// The attempt ran at ScheduledAt and took no time; the
				// next is due after the wait.
				job.Errors = append(job.Errors, rivertype.AttemptError{At: job.ScheduledAt, Attempt: i + 1, Error: "transient"})
				job.ScheduledAt = job.ScheduledAt.Add(got)
			}
		})
	}
}

func TestPolicy_NextRetryIsNowPlusTheWait(t *testing.T) {
	r, err := retry.New(retry.WithBackoff(retry.Exponential(time.Second, 2, time.Minute)), retry.WithJitter(retry.NoJitter))
	require.NoError(t, err)
	p, err := retryriver.NewPolicy(r)
	require.NoError(t, err)
	job := &rivertype.JobRow{Attempt: 3, Errors: make([]rivertype.AttemptError, 2)}
	before := time.Now()
	next := p.NextRetry(job)
	assert.WithinRange(t, next, before.Add(4*time.Second), time.Now().Add(4*time.Second), "the wait after attempt 3: 1s*2^2")
	assert.Equal(t, time.UTC, next.Location())

	// A nil Retrier is the zero Retrier: 100ms doubling, full jitter.
	zero, err := retryriver.NewPolicy(nil)
	require.NoError(t, err)
	assert.LessOrEqual(t, zero.Delay(&rivertype.JobRow{Attempt: 1}), 100*time.Millisecond, "the wait after attempt 1")
}
