package retry_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/retrystats"
)

// queue is a HandOff that keeps what it is given, or fails with err.
type queue struct {
	mu    sync.Mutex
	err   error
	taken []retry.Waiting
}

func (q *queue) HandOff(_ context.Context, w retry.Waiting) (string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return "", q.err
	}
	q.taken = append(q.taken, w)
	return "job-" + strconv.Itoa(len(q.taken)), nil
}

func (q *queue) waitings() []retry.Waiting {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]retry.Waiting(nil), q.taken...)
}

// A wait at or above the threshold is handed off: the call ends at once,
// its error holding a *HandedOff that carries the job's ID, and the
// HandOff gets what a worker needs to resume.
func TestHandOff_longWaitEndsTheCallHandedOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &queue{}
		r := mustNew(t, retry.WithHandOff(q, nil), retry.WithName("charge"), retry.WithPayload([]byte(`{"n":1}`)),
			retry.WithBackoff(retry.Constant(time.Minute)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		fn, calls := failing(5, errTransient)
		start := time.Now()
		err := r.Do(context.Background(), fn)
		assert.Equal(t, start, time.Now(), "the call waited")
		requireHandedOff(t, err)
		assert.ErrorIs(t, err, errTransient, "the last attempt's error is still in the chain")
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retry.OutcomeHandedOff, e.Outcome)
		assert.Equal(t, 1, e.Attempts)
		var h *retry.HandedOff
		require.ErrorAs(t, err, &h)
		assert.Equal(t, "job-1", h.ID)
		assert.Equal(t, "retry: remaining attempts handed off as job-1 after 1 attempt: transient", err.Error())
		assert.EqualValues(t, 1, calls.Load())
		assert.Equal(t, []retry.Waiting{{Name: "charge", Attempts: 1, Wait: time.Minute, Due: start.Add(time.Minute),
			Err: errTransient, Payload: []byte(`{"n":1}`)}}, q.waitings())
	})
}

// A wait under the threshold is made in memory, and the HandOff is not
// asked.
func TestHandOff_shortWaitIsMadeInMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &queue{}
		r := mustNew(t, retry.WithName("job"), retry.WithHandOff(q, &retry.HandOffOptions{Threshold: 10 * time.Second}),
			retry.WithBackoff(retry.Constant(9*time.Second)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		fn, calls := failing(2, errTransient)
		start := time.Now()
		require.NoError(t, r.Do(context.Background(), fn))
		assert.Equal(t, 18*time.Second, time.Since(start))
		assert.EqualValues(t, 3, calls.Load())
		assert.Empty(t, q.waitings())
	})
}

// Once Stopping is done, every wait is handed off, the shortest too.
func TestHandOff_stoppingHandsOffEveryWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &queue{}
		stopping, stop := context.WithCancel(context.Background())
		r := mustNew(t, retry.WithName("job"), retry.WithHandOff(q, &retry.HandOffOptions{Stopping: stopping}),
			retry.WithBackoff(retry.Constant(time.Millisecond)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		fn, _ := failing(1, errTransient)
		require.NoError(t, r.Do(context.Background(), fn), "a short wait before the process stops")
		stop()
		fn, _ = failing(1, errTransient)
		err := r.Do(context.Background(), fn)
		requireHandedOff(t, err)
		require.Len(t, q.waitings(), 1)
		assert.Equal(t, time.Millisecond, q.waitings()[0].Wait)
	})
}

// When the HandOff fails, the call waits in memory as it would have, and
// observers hear that wait as any other: nothing is lost.
func TestHandOff_failureFallsBackToTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &queue{err: errors.New("queue down")}
		rec := &recorder{}
		r := mustNew(t, retry.WithName("job"), retry.WithHandOff(q, nil), retry.WithObserver(rec),
			retry.WithBackoff(retry.Constant(2*time.Minute)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		fn, calls := failing(1, errTransient)
		start := time.Now()
		require.NoError(t, r.Do(context.Background(), fn))
		assert.Equal(t, 2*time.Minute, time.Since(start))
		assert.EqualValues(t, 2, calls.Load())
		assert.Equal(t, []string{"start", "end", "retry", "waitend", "start", "end", "done"}, rec.events)
	})
}

// Observers hear a handed-off call as its own outcome, with no retry
// announced for the wait it did not make; retrystats counts it apart
// from the failures.
func TestHandOff_observersCountItsOwnOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, stats := &recorder{}, &retrystats.Stats{}
		r := mustNew(t, retry.WithName("job"), retry.WithHandOff(&queue{}, nil), retry.WithObserver(rec), retry.WithObserver(stats),
			retry.WithBackoff(retry.Constant(time.Hour)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		fn, _ := failing(1, errTransient)
		requireHandedOff(t, r.Do(context.Background(), fn))
		assert.Equal(t, []string{"start", "end", "done"}, rec.events)
		require.Len(t, rec.dones(), 1)
		assert.Equal(t, retry.OutcomeHandedOff, rec.dones()[0].Outcome)
		s := stats.Snapshot()
		assert.EqualValues(t, 1, s.HandedOff)
		assert.EqualValues(t, 1, s.Calls())
		assert.Zero(t, s.Exhausted+s.Permanent+s.Refused+s.Unknown)
		assert.Zero(t, s.InFlight)
		assert.Zero(t, s.Waiting)
		assert.Equal(t, "handed-off", retry.OutcomeHandedOff.String())
		var o retry.Outcome
		require.NoError(t, o.UnmarshalText([]byte("handed-off")))
		assert.Equal(t, retry.OutcomeHandedOff, o)
	})
}

// A handed-off call is not dead-lettered: its work goes on in the queue.
// Asking for it in DeadLetterOptions.On is bad input.
func TestHandOff_isNotDeadLettered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := deadletter.NewMemorySink()
		r := mustNew(t, retry.WithName("job"), retry.WithHandOff(&queue{}, nil), retry.WithDeadLetter(sink, nil),
			retry.WithBackoff(retry.Constant(time.Hour)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		fn, _ := failing(1, errTransient)
		err := r.Do(context.Background(), fn)
		requireHandedOff(t, err)
		assert.NotErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
		assert.Zero(t, sink.Len())
	})
	_, err := retry.New(retry.WithDeadLetter(deadletter.NewMemorySink(),
		&retry.DeadLetterOptions{On: []retry.Outcome{retry.OutcomeHandedOff}}))
	assert.ErrorIs(t, err, retry.ErrInvalidOption)
}

// An idempotent call hands off its key and releases its claim, so that
// the attempts that resume under the key may claim it: the work is done
// once, by them.
func TestHandOff_idempotentCallReleasesItsKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &queue{}
		store := memstore.New(nil)
		r := mustNew(t, retry.WithName("job"), retry.WithHandOff(q, nil), retry.WithIdempotency(store, nil),
			retry.WithBackoff(retry.Constant(time.Hour)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		ctx := retry.ContextWithIdempotencyKey(context.Background(), "order-7")
		fn, calls := failing(1, errTransient)
		requireHandedOff(t, r.Do(ctx, fn))
		require.Len(t, q.waitings(), 1)
		assert.Equal(t, "order-7", q.waitings()[0].IdempotencyKey)
		// The resumed work, under the same key, runs fn; a repeat of it
		// replays the success.
		require.NoError(t, r.Do(ctx, fn))
		require.NoError(t, r.Do(ctx, fn))
		assert.EqualValues(t, 2, calls.Load())
	})
}

// A budget's leave to retry is given back when the wait is handed off:
// the budget does not count a call as waiting that no longer is.
func TestHandOff_givesTheBudgetItsWaitBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &waitBudget{}
		r := mustNew(t, retry.WithName("job"), retry.WithHandOff(&queue{}, nil), retry.WithOverload(&retry.OverloadOptions{Budget: b}),
			retry.WithBackoff(retry.Constant(time.Hour)), retry.WithJitter(retry.NoJitter))
		fn, _ := failing(1, errTransient)
		requireHandedOff(t, r.Do(context.Background(), fn))
		assert.Equal(t, 1, b.retries)
		assert.Equal(t, 1, b.waited)
	})
}

type waitBudget struct{ retries, waited int }

func (b *waitBudget) Attempted(int, bool, bool) {}
func (b *waitBudget) Retry(time.Duration) error { b.retries++; return nil }
func (b *waitBudget) Waited()                   { b.waited++ }

func TestWithHandOff_badInput(t *testing.T) {
	var nilQueue *queue
	for name, o := range map[string]retry.Option{
		"nil":                retry.WithHandOff(nil, nil),
		"nil pointer":        retry.WithHandOff(nilQueue, nil),
		"negative threshold": retry.WithHandOff(&queue{}, &retry.HandOffOptions{Threshold: -time.Second}),
		"negative timeout":   retry.WithHandOff(&queue{}, &retry.HandOffOptions{Timeout: -time.Second}),
		"timeout of 2ns":     retry.WithHandOff(&queue{}, &retry.HandOffOptions{Timeout: 2}),
	} {
		_, err := retry.New(o, retry.WithName("job"))
		assert.ErrorIs(t, err, retry.ErrInvalidOption, name)
	}
	_, err := retry.New(retry.WithHandOff(&queue{}, &retry.HandOffOptions{Timeout: 2}), retry.WithName("job"))
	assert.ErrorContains(t, err, "HandOffOptions.Timeout is 2ns; it must be 0 (the default, 2s) or at least 1ms")
	// A worker finds the work to resume by the call's name: without one,
	// the job would be one no worker takes.
	_, err = retry.New(retry.WithHandOff(&queue{}, nil))
	assert.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.ErrorContains(t, err, "WithHandOff needs WithName")
}

// A resumed call counts the attempts made before the hand-off: its first
// attempt is the next one, WithMaxAttempts counts them all, the error
// reports them all, and a hand-off again says the total.
func TestWithResume_continuesTheAttemptCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r := mustNew(t, retry.WithMaxAttempts(3), retry.WithObserver(rec), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter))
		resumed, err := r.With(retry.WithResume(2, 5*time.Second))
		require.NoError(t, err)
		fn, calls := failing(10, errTransient)
		err = resumed.Do(context.Background(), fn)
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retry.OutcomeExhausted, e.Outcome)
		assert.Equal(t, 3, e.Attempts)
		assert.EqualValues(t, 1, calls.Load(), "only the third attempt was left")
		assert.Equal(t, []int{3}, rec.starts)
		assert.Equal(t, 3, rec.dones()[0].Attempts)

		// One attempt made before: the resumed call may wait in memory and
		// succeed at the third.
		resumed, err = r.With(retry.WithResume(1, 5*time.Second))
		require.NoError(t, err)
		fn, calls = failing(1, errTransient)
		require.NoError(t, resumed.Do(context.Background(), fn))
		assert.EqualValues(t, 2, calls.Load())

		// Handed off again, the total is what the HandOff hears.
		q := &queue{}
		again, err := r.With(retry.WithResume(1, time.Minute), retry.WithName("job"), retry.WithHandOff(q, &retry.HandOffOptions{Threshold: time.Second}))
		require.NoError(t, err)
		fn, _ = failing(1, errTransient)
		requireHandedOff(t, again.Do(context.Background(), fn))
		require.Len(t, q.waitings(), 1)
		assert.Equal(t, 2, q.waitings()[0].Attempts)
	})
}

func TestWithResume_badInput(t *testing.T) {
	for _, o := range []retry.Option{retry.WithResume(-1, 0), retry.WithResume(1, -time.Second)} {
		_, err := retry.New(o)
		assert.ErrorIs(t, err, retry.ErrInvalidOption)
	}
}

// A wait that would end past the call's deadline is handed off all the
// same: a call handed off returns at once, so its deadline need not cover
// the wait. Without a hand-off the call ends at once with the deadline.
func TestHandOff_waitPastTheDeadlineIsHandedOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &queue{}
		opts := []retry.Option{retry.WithName("job"), retry.WithBackoff(retry.Constant(2 * time.Second)),
			retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true})}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		fn, calls := failing(1, errTransient)
		r := mustNew(t, append(opts, retry.WithHandOff(q, &retry.HandOffOptions{Threshold: 100 * time.Millisecond}))...)
		start := time.Now()
		requireHandedOff(t, r.Do(ctx, fn))
		assert.Equal(t, start, time.Now(), "the call waited")
		assert.EqualValues(t, 1, calls.Load())
		require.Len(t, q.waitings(), 1)
		assert.Equal(t, 2*time.Second, q.waitings()[0].Wait)

		// A wait under the threshold is not the queue's: the deadline ends it.
		r = mustNew(t, append(opts, retry.WithHandOff(q, &retry.HandOffOptions{Threshold: 3 * time.Second}))...)
		fn, _ = failing(1, errTransient)
		var e *retry.Error
		require.ErrorAs(t, r.Do(ctx, fn), &e)
		assert.Equal(t, retry.OutcomeDeadline, e.Outcome)
		assert.Len(t, q.waitings(), 1)
	})
}

// When the hand-off of a wait past the deadline fails, no wait in memory
// can be made: the call ends at once with the deadline, the last error
// kept, as it would have without the option.
func TestHandOff_failedHandOffPastTheDeadlineEndsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := mustNew(t, retry.WithName("job"), retry.WithHandOff(&queue{err: errors.New("queue down")}, &retry.HandOffOptions{Threshold: time.Second}),
			retry.WithBackoff(retry.Constant(2*time.Second)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		fn, calls := failing(1, errTransient)
		start := time.Now()
		err := r.Do(ctx, fn)
		assert.Equal(t, start, time.Now(), "the call waited")
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, retry.OutcomeDeadline, e.Outcome)
		assert.ErrorIs(t, err, errTransient)
		assert.EqualValues(t, 1, calls.Load())
	})
}

// Stopping ends a wait already under way at once and hands its rest off,
// before another attempt: the process being stopped runs no more of the
// work and is not held up.
func TestHandOff_stoppingCutsAWaitUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &queue{}
		rec := &recorder{}
		stopping, stop := context.WithCancel(context.Background())
		r := mustNew(t, retry.WithName("job"), retry.WithHandOff(q, &retry.HandOffOptions{Stopping: stopping}), retry.WithObserver(rec),
			retry.WithBackoff(retry.Constant(3*time.Second)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		fn, calls := failing(5, errTransient)
		start := time.Now()
		time.AfterFunc(500*time.Millisecond, stop)
		requireHandedOff(t, r.Do(context.Background(), fn))
		assert.Equal(t, 500*time.Millisecond, time.Since(start))
		assert.EqualValues(t, 1, calls.Load())
		require.Len(t, q.waitings(), 1)
		w := q.waitings()[0]
		assert.Equal(t, 2500*time.Millisecond, w.Wait, "the rest of the wait")
		assert.Equal(t, start.Add(3*time.Second), w.Due)
		assert.Equal(t, 1, w.Attempts)
		assert.Equal(t, []string{"start", "end", "retry", "waitend", "done"}, rec.events)
		assert.Equal(t, retry.OutcomeHandedOff, rec.dones()[0].Outcome)
	})
}

// A wait that Stopping cut short, whose hand-off then fails, is waited
// out in memory: nothing is lost, and the attempt is not early.
func TestHandOff_stoppingWithAFailedHandOffWaitsTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stopping, stop := context.WithCancel(context.Background())
		r := mustNew(t, retry.WithName("job"), retry.WithHandOff(&queue{err: errors.New("queue down")}, &retry.HandOffOptions{Stopping: stopping}),
			retry.WithBackoff(retry.Constant(3*time.Second)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		fn, calls := failing(1, errTransient)
		start := time.Now()
		time.AfterFunc(500*time.Millisecond, stop)
		require.NoError(t, r.Do(context.Background(), fn))
		assert.Equal(t, 3*time.Second, time.Since(start))
		assert.EqualValues(t, 2, calls.Load())
	})
}

// blockingQueue is a HandOff that hangs until its context ends, as an
// insert into a database that does not answer.
type blockingQueue struct{ asked int }

func (q *blockingQueue) HandOff(ctx context.Context, _ retry.Waiting) (string, error) {
	q.asked++
	<-ctx.Done()
	return "", ctx.Err()
}

// HandOffOptions.Timeout bounds the HandOff: past it, the call waits in
// memory as documented instead of hanging until its deadline.
func TestHandOff_timeoutBoundsTheHandOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &blockingQueue{}
		r := mustNew(t, retry.WithName("job"), retry.WithHandOff(q, &retry.HandOffOptions{Threshold: time.Second, Timeout: 300 * time.Millisecond}),
			retry.WithBackoff(retry.Constant(2*time.Second)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
		defer cancel()
		fn, calls := failing(1, errTransient)
		start := time.Now()
		require.NoError(t, r.Do(ctx, fn))
		assert.Equal(t, 2300*time.Millisecond, time.Since(start), "the HandOff's timeout, then the wait")
		assert.EqualValues(t, 2, calls.Load())
		assert.Equal(t, 1, q.asked)

		// The default is 2s.
		r = mustNew(t, retry.WithName("job"), retry.WithHandOff(q, &retry.HandOffOptions{Threshold: time.Second}),
			retry.WithBackoff(retry.Constant(2*time.Second)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		fn, _ = failing(1, errTransient)
		start = time.Now()
		require.NoError(t, r.Do(context.Background(), fn))
		assert.Equal(t, 4*time.Second, time.Since(start))
	})
}

// emptyIDQueue is a HandOff that says it took the call but names no job.
type emptyIDQueue struct{}

func (emptyIDQueue) HandOff(context.Context, retry.Waiting) (string, error) { return "", nil }

// A HandOff that returns an empty ID has not said where the work is: the
// call waits in memory, as for a failed hand-off, so that nothing is lost.
func TestHandOff_emptyIDWaitsInMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := mustNew(t, retry.WithName("job"), retry.WithHandOff(emptyIDQueue{}, &retry.HandOffOptions{Threshold: time.Second}),
			retry.WithBackoff(retry.Constant(time.Minute)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		fn, calls := failing(1, errTransient)
		start := time.Now()
		require.NoError(t, r.Do(context.Background(), fn))
		assert.Equal(t, time.Minute, time.Since(start))
		assert.EqualValues(t, 2, calls.Load())
	})
}

// A resumed count beyond any call's saturates: the call makes one
// attempt and stops exhausted, its count positive, instead of overflowing
// into a retry without limit.
func TestWithResume_hugeCountSaturates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := mustNew(t, retry.WithMaxAttempts(3), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithBackoff(retry.Constant(time.Millisecond)))
		resumed, err := r.With(retry.WithResume(math.MaxInt, time.Second))
		require.NoError(t, err)
		fn, calls := failing(1000, errTransient)
		var e *retry.Error
		require.ErrorAs(t, resumed.Do(context.Background(), fn), &e)
		assert.Equal(t, retry.OutcomeExhausted, e.Outcome)
		assert.Equal(t, 1<<31, e.Attempts)
		assert.EqualValues(t, 1, calls.Load())
	})
}

// stubbornQueue is a HandOff that ignores its context: it takes its time,
// then stores the call all the same.
type stubbornQueue struct{ took time.Duration }

func (q stubbornQueue) HandOff(context.Context, retry.Waiting) (string, error) {
	time.Sleep(q.took)
	return "job-1", nil
}

// A HandOff must return when its context ends (HandOff's doc): one that
// ignores it holds the call for as long as it takes, past Timeout and
// past the deadline, and the call then ends with what it returned. The
// work is not lost either way.
func TestHandOff_handOffThatIgnoresItsContextHoldsTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := mustNew(t, retry.WithName("job"), retry.WithHandOff(stubbornQueue{took: 5 * time.Second}, &retry.HandOffOptions{Threshold: time.Second, Timeout: 100 * time.Millisecond}),
			retry.WithBackoff(retry.Constant(2*time.Second)), retry.WithJitter(retry.NoJitter), retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		fn, calls := failing(1, errTransient)
		start := time.Now()
		requireHandedOff(t, r.Do(ctx, fn))
		assert.Equal(t, 5*time.Second, time.Since(start))
		assert.EqualValues(t, 1, calls.Load())
	})
}

// requireHandedOff fails unless err is a handed-off call's, with a
// *HandedOff in its chain.
func requireHandedOff(t *testing.T, err error) *retry.HandedOff {
	t.Helper()
	var e *retry.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, retry.OutcomeHandedOff, e.Outcome)
	var h *retry.HandedOff
	require.ErrorAs(t, err, &h)
	return h
}
