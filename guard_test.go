package retry_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/overload"
)

// recordingLimit grants every permit, unless refuse is set, and records
// what Do tells it.
type recordingLimit struct {
	mu       sync.Mutex
	refuse   func(overload.Attempt) bool
	timed    bool
	inFlight int
	acquired []overload.Attempt
	critical []overload.Criticality // of each acquired attempt's context
	released []overload.Result
	latency  []time.Duration
}

func (l *recordingLimit) Acquire(ctx context.Context, a overload.Attempt) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse != nil && l.refuse(a) {
		return overload.ErrLimitExceeded
	}
	l.inFlight++
	l.acquired = append(l.acquired, a)
	l.critical = append(l.critical, overload.CriticalityOf(ctx))
	return nil
}

func (l *recordingLimit) Release(r overload.Result, latency time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	l.released = append(l.released, r)
	l.latency = append(l.latency, latency)
}

func (l *recordingLimit) Timed() bool { return l.timed }

func (l *recordingLimit) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight
}

func kinds(as []overload.Attempt) []overload.Kind {
	var ks []overload.Kind
	for _, a := range as {
		ks = append(ks, a.Kind)
	}
	return ks
}

func TestLimit_eachAttemptTakesAPermitAndGivesItBackBeforeTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &recordingLimit{}
		r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Limit: l, NoBudget: true}),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter))
		heldDuringWaits := []int{}
		calls := 0
		err := r.Do(context.Background(), func(context.Context) error {
			calls++
			if calls > 1 {
				heldDuringWaits = append(heldDuringWaits, l.held()-1) // less this attempt's own
			}
			switch calls {
			case 1:
				return errTransient
			case 2:
				return retry.Permanent(errors.New("no such account"))
			}
			return nil
		})
		require.Error(t, err)
		assert.Equal(t, []overload.Kind{overload.FirstAttempt, overload.RetryAttempt}, kinds(l.acquired))
		assert.Equal(t, []overload.Result{overload.Failed, overload.Answered}, l.released, "a permanent answer says the downstream coped")
		assert.Equal(t, []int{0}, heldDuringWaits, "no permit is held through a wait")
		assert.Zero(t, l.held())
	})
}

func TestLimit_refusalEndsTheCallAndMatchesErrLimitExceeded(t *testing.T) {
	for name, refuseAt := range map[string]overload.Kind{"first attempt": overload.FirstAttempt, "retry": overload.RetryAttempt} {
		t.Run(name, func(t *testing.T) {
			l := &recordingLimit{refuse: func(a overload.Attempt) bool { return a.Kind == refuseAt }}
			sink := deadletter.NewMemorySink()
			r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Limit: l, NoBudget: true}),
				retry.WithBackoff(retry.Constant(0)), retry.WithName("charge"), retry.WithDeadLetter(sink, nil))
			calls := 0
			err := r.Do(context.Background(), func(context.Context) error { calls++; return errTransient })
			assert.ErrorIs(t, err, overload.ErrLimitExceeded)
			var e *retry.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, retry.OutcomeRefused, e.Outcome)
			assert.Equal(t, int(refuseAt), calls, "fn is not called for the refused attempt")
			assert.Equal(t, int(refuseAt), e.Attempts)
			assert.Equal(t, map[overload.Kind]error{overload.FirstAttempt: nil, overload.RetryAttempt: errTransient}[refuseAt], e.Last,
				"the last attempt's error, none if no attempt ran")
			letters := sink.Records()
			require.Len(t, letters, 1)
			assert.Equal(t, retry.OutcomeRefused, letters[0].Reason)
			assert.Equal(t, map[overload.Kind]string{overload.FirstAttempt: "", overload.RetryAttempt: "transient"}[refuseAt], letters[0].LastError)
			assert.Zero(t, l.held())
		})
	}
}

func TestLimit_breakerThatAllowedARefusedAttemptHearsItNotCounted(t *testing.T) {
	br := &fakeBreaker{}
	l := &recordingLimit{refuse: func(overload.Attempt) bool { return true }}
	r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Limit: l, Breaker: br, NoBudget: true}))
	err := r.Do(context.Background(), func(context.Context) error { return nil })
	require.ErrorIs(t, err, overload.ErrLimitExceeded)
	assert.Equal(t, []string{"not counted"}, br.reports)
}

func TestLimit_droppedAttemptsTeachNothing(t *testing.T) {
	t.Run("the call's context", func(t *testing.T) {
		l := &recordingLimit{}
		r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Limit: l, NoBudget: true}))
		ctx, cancel := context.WithCancel(context.Background())
		_ = r.Do(ctx, func(context.Context) error { cancel(); return context.Canceled })
		assert.Equal(t, []overload.Result{overload.Dropped}, l.released)
	})
	t.Run("a panic", func(t *testing.T) {
		l := &recordingLimit{}
		r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Limit: l, NoBudget: true}))
		assert.Panics(t, func() { _ = r.Do(context.Background(), func(context.Context) error { panic("boom") }) })
		assert.Equal(t, []overload.Result{overload.Dropped}, l.released)
	})
}

func TestLimit_criticalityTravelsInTheContext(t *testing.T) {
	l := &recordingLimit{}
	r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Limit: l}))
	ctx := overload.WithCriticality(context.Background(), overload.Sheddable)
	require.NoError(t, r.Do(ctx, func(context.Context) error { return nil }))
	assert.Equal(t, []overload.Attempt{{Kind: overload.FirstAttempt}}, l.acquired)
	assert.Equal(t, []overload.Criticality{overload.Sheddable}, l.critical)
}

func TestLimit_timedLimitHearsEachAttemptsLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &recordingLimit{timed: true}
		r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Limit: l, NoBudget: true}),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter))
		calls := 0
		require.NoError(t, r.Do(context.Background(), func(context.Context) error {
			calls++
			time.Sleep(time.Duration(calls) * 30 * time.Millisecond)
			if calls < 2 {
				return errTransient
			}
			return nil
		}))
		assert.Equal(t, []time.Duration{30 * time.Millisecond, 60 * time.Millisecond}, l.latency)
		assert.Equal(t, []time.Duration{0}, (&recordingLimit{}).latencyOf(r), "an untimed limit hears 0")
	})
}

// latencyOf runs one call of r's settings with l instead of its limit and
// returns the latencies l heard.
func (l *recordingLimit) latencyOf(r *retry.Retrier) []time.Duration {
	d, err := r.With(retry.WithOverload(&retry.OverloadOptions{Limit: l}))
	if err != nil {
		panic(err)
	}
	_ = d.Do(context.Background(), func(context.Context) error { time.Sleep(time.Millisecond); return nil })
	return l.latency
}

func TestLimit_hedgesTakePermitsAndAreShed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &recordingLimit{}
		r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Limit: l, NoBudget: true}),
			retry.WithHedge(&retry.HedgeOptions{Delay: 10 * time.Millisecond}))
		var calls atomic.Int32
		require.NoError(t, r.Hedge(context.Background(), func(ctx context.Context) error {
			if calls.Add(1) == 1 { // the first attempt hangs until the hedge wins
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}))
		synctest.Wait()
		assert.Equal(t, []overload.Kind{overload.FirstAttempt, overload.HedgeAttempt}, kinds(l.acquired))
		assert.ElementsMatch(t, []overload.Result{overload.Answered, overload.Dropped}, l.released, "the cancelled first attempt teaches nothing")
		assert.Zero(t, l.held())

		shed := &recordingLimit{refuse: func(a overload.Attempt) bool { return a.Kind == overload.HedgeAttempt }}
		r = mustNew(t, retry.WithOverload(&retry.OverloadOptions{Limit: shed, NoBudget: true}),
			retry.WithHedge(&retry.HedgeOptions{Delay: 10 * time.Millisecond}))
		start := time.Now()
		require.NoError(t, r.Hedge(context.Background(), func(ctx context.Context) error {
			time.Sleep(50 * time.Millisecond)
			return nil
		}))
		assert.Equal(t, 50*time.Millisecond, time.Since(start), "a refused hedge leaves the first attempt running")
		assert.Equal(t, []overload.Kind{overload.FirstAttempt}, kinds(shed.acquired))
	})
}

func TestLimit_adaptiveQueuesAFirstAttemptWithinTheCallsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := overload.NewAdaptive(overload.AdaptiveOptions{Min: 1, Max: 1, MaxQueued: 1, QueueTimeout: time.Minute})
		require.NoError(t, err)
		r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Limit: l}))
		require.NoError(t, l.Acquire(context.Background(), overload.Attempt{}))
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err = r.Do(ctx, func(context.Context) error { return nil })
		assert.ErrorIs(t, err, overload.ErrLimitExceeded)
		assert.Equal(t, 200*time.Millisecond, time.Since(start))

		go func() { time.Sleep(50 * time.Millisecond); l.Release(overload.Answered, 0) }()
		start = time.Now()
		require.NoError(t, r.Do(context.Background(), func(context.Context) error { return nil }))
		assert.Equal(t, 50*time.Millisecond, time.Since(start), "the released permit is handed to the waiting attempt")
		assert.Zero(t, l.Stats().InFlight)
	})
}

func TestLimit_everyEntryPointTakesAndGivesBackThePermit(t *testing.T) {
	for name, call := range map[string]func(l overload.Limit, fn func(context.Context) error) error{
		"Retrier.Do": func(l overload.Limit, fn func(context.Context) error) error {
			return mustNew(t, retry.WithOverload(&retry.OverloadOptions{Limit: l})).Do(context.Background(), fn)
		},
		"DoValueOn": func(l overload.Limit, fn func(context.Context) error) error {
			r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{Limit: l}))
			_, err := retry.DoValueOn(context.Background(), r, func(ctx context.Context) (int, error) { return 1, fn(ctx) })
			return err
		},
		"package Do": func(l overload.Limit, fn func(context.Context) error) error {
			return retry.Do(context.Background(), fn, retry.WithOverload(&retry.OverloadOptions{Limit: l}))
		},
		"package DoValue": func(l overload.Limit, fn func(context.Context) error) error {
			_, err := retry.DoValue(context.Background(), func(ctx context.Context) (int, error) { return 1, fn(ctx) }, retry.WithOverload(&retry.OverloadOptions{Limit: l}))
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			l := &recordingLimit{}
			require.NoError(t, call(l, func(context.Context) error { return nil }))
			calls := 0
			err := call(l, func(context.Context) error {
				if calls++; calls == 1 {
					return errTransient
				}
				return nil
			})
			require.NoError(t, err)
			assert.Equal(t, []overload.Kind{overload.FirstAttempt, overload.FirstAttempt, overload.RetryAttempt}, kinds(l.acquired))
			assert.Equal(t, []overload.Result{overload.Answered, overload.Failed, overload.Answered}, l.released)

			refused := &recordingLimit{refuse: func(overload.Attempt) bool { return true }}
			calls = 0
			err = call(refused, func(context.Context) error { calls++; return nil })
			assert.ErrorIs(t, err, overload.ErrLimitExceeded)
			assert.Zero(t, calls)
			var e *retry.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, retry.Error{Outcome: retry.OutcomeRefused, Cause: overload.ErrLimitExceeded}, *e, "no attempt, no last error")
		})
	}
}
