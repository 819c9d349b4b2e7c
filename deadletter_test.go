package retry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

var errDead = errors.New("boom")

// dlDoneRecorder is an Observer that keeps the Done events.
type dlDoneRecorder struct {
	mu   sync.Mutex
	done []retry.Done
}

func (*dlDoneRecorder) OnAttemptStart(context.Context, retry.AttemptStart) {}
func (*dlDoneRecorder) OnAttemptEnd(context.Context, retry.AttemptEnd)     {}
func (*dlDoneRecorder) OnRetry(context.Context, retry.Scheduled)           {}
func (*dlDoneRecorder) OnWaitEnd(context.Context, retry.WaitEnd)           {}
func (d *dlDoneRecorder) OnDone(_ context.Context, e retry.Done) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.done = append(d.done, e)
}

func (d *dlDoneRecorder) only(t *testing.T) retry.Done {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	require.Len(t, d.done, 1)
	return d.done[0]
}

// terminal runs a call that ends with the given outcome, on synctest time.
func endWith(t *testing.T, want retry.Outcome, opts ...retry.Option) error {
	t.Helper()
	ctx := t.Context()
	fn := func(context.Context) error { return errDead }
	switch want {
	case retry.OutcomeExhausted:
		opts = append(opts, retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter))
	case retry.OutcomePermanent:
		fn = func(context.Context) error { return retry.Permanent(errDead) }
	case retry.OutcomeMaxElapsed:
		opts = append(opts, retry.WithMaxElapsed(3*time.Second), retry.WithBackoff(retry.Constant(2*time.Second)), retry.WithJitter(retry.NoJitter))
	case retry.OutcomeDeadline:
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		opts = append(opts, retry.WithBackoff(retry.Constant(2*time.Second)), retry.WithJitter(retry.NoJitter))
	case retry.OutcomeCanceled:
		// Cancelled during the wait after the first attempt: no attempt
		// was running, so the outcome is known.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		time.AfterFunc(time.Second, cancel)
		opts = append(opts, retry.WithBackoff(retry.Constant(2*time.Second)), retry.WithJitter(retry.NoJitter))
	case retry.OutcomeUnknown:
		// Cancelled while fn runs: fn may have acted.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		fn = func(context.Context) error { cancel(); return errDead }
	}
	r, err := retry.New(opts...)
	require.NoError(t, err)
	return r.Do(ctx, fn)
}

func TestDeadLetterEveryTerminalPath(t *testing.T) {
	t.Parallel()
	all := []retry.Outcome{retry.OutcomePermanent, retry.OutcomeExhausted, retry.OutcomeMaxElapsed, retry.OutcomeDeadline, retry.OutcomeCanceled, retry.OutcomeUnknown}
	cases := []struct {
		name     string
		on       []retry.Outcome // nil: the default
		outcome  retry.Outcome
		attempts int
		recorded bool
	}{
		{"exhausted_default", nil, retry.OutcomeExhausted, 3, true},
		{"permanent_default", nil, retry.OutcomePermanent, 1, true},
		{"max_elapsed_default", nil, retry.OutcomeMaxElapsed, 2, true},
		{"deadline_default", nil, retry.OutcomeDeadline, 2, true},
		{"canceled_default", nil, retry.OutcomeCanceled, 1, false},
		{"unknown_default", nil, retry.OutcomeUnknown, 1, true},
		{"unknown_all", all, retry.OutcomeUnknown, 1, true},
		{"unknown_only_deadline", []retry.Outcome{retry.OutcomeDeadline}, retry.OutcomeUnknown, 1, false},
		{"exhausted_all", all, retry.OutcomeExhausted, 3, true},
		{"permanent_all", all, retry.OutcomePermanent, 1, true},
		{"max_elapsed_all", all, retry.OutcomeMaxElapsed, 2, true},
		{"deadline_all", all, retry.OutcomeDeadline, 2, true},
		{"canceled_all", all, retry.OutcomeCanceled, 1, true},
		{"exhausted_only_deadline", []retry.Outcome{retry.OutcomeDeadline}, retry.OutcomeExhausted, 3, false},
		{"deadline_only_deadline", []retry.Outcome{retry.OutcomeDeadline}, retry.OutcomeDeadline, 2, true},
		{"exhausted_empty_is_default", []retry.Outcome{}, retry.OutcomeExhausted, 3, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				sink := deadletter.NewMemorySink()
				obs := &dlDoneRecorder{}
				opts := []retry.Option{retry.WithDeadLetter(sink, &retry.DeadLetterOptions{On: tc.on}), retry.WithObserver(obs), retry.WithName("charge"), retry.WithPayload([]byte(`{"n":1}`))}
				start := time.Now()
				err := endWith(t, tc.outcome, opts...)

				var re *retry.Error
				require.ErrorAs(t, err, &re)
				assert.Equal(t, tc.outcome, re.Outcome)
				assert.NotErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
				done := obs.only(t)
				assert.Equal(t, err, done.Err)
				if !tc.recorded {
					assert.False(t, done.DeadLettered || done.DeadLetterFailed)
					assert.Zero(t, sink.Len())
					return
				}
				assert.True(t, done.DeadLettered)
				recs := sink.Records()
				require.Len(t, recs, 1)
				dl := recs[0]
				assert.Len(t, dl.ID, 32)
				assert.Equal(t, "charge", dl.Name)
				assert.Equal(t, []byte(`{"n":1}`), dl.Payload)
				assert.Equal(t, tc.outcome, dl.Reason)
				assert.Equal(t, tc.attempts, dl.Attempts)
				assert.Equal(t, "boom", dl.LastError)
				assert.Equal(t, start, dl.FirstAttempt)
				assert.Equal(t, time.Now(), dl.GaveUp)
				assert.Len(t, dl.Errors, tc.attempts)
				assert.True(t, dl.Redriven.IsZero())
			})
		})
	}
}

func TestDeadLetterKeepsAttemptErrors(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sink := deadletter.NewMemorySink()
		// 21 attempts: the last 3 are kept in a ring of 3, and 21 leaves
		// its start off index 0, so the order it is read in is checked
		// (20 attempts would leave it at 0, where any order passes).
		n := 0
		err := retry.Do(t.Context(), func(context.Context) error {
			n++
			return fmt.Errorf("failure %d", n)
		}, retry.WithMaxAttempts(21), retry.WithBackoff(retry.Linear(time.Second, time.Second, time.Hour)),
			retry.WithJitter(retry.NoJitter), retry.WithDeadLetter(sink, &retry.DeadLetterOptions{MaxErrors: 5}))
		require.ErrorIs(t, err, retry.ErrExhausted)
		recs := sink.Records()
		require.Len(t, recs, 1)
		want := []retry.AttemptError{
			{Attempt: 1, Wait: 0, Error: "failure 1"},
			{Attempt: 2, Wait: time.Second, Error: "failure 2"},
			{Attempt: 19, Wait: 18 * time.Second, Error: "failure 19"},
			{Attempt: 20, Wait: 19 * time.Second, Error: "failure 20"},
			{Attempt: 21, Wait: 20 * time.Second, Error: "failure 21"},
		}
		assert.Equal(t, want, recs[0].Errors)
		assert.Equal(t, "failure 21", recs[0].LastError)
	})
}

func TestDeadLetterErrorsBoundZeroKeepsNone(t *testing.T) {
	t.Parallel()
	sink := deadletter.NewMemorySink()
	err := retry.Do(t.Context(), func(context.Context) error { return errDead },
		retry.WithBackoff(retry.Constant(0)), retry.WithDeadLetter(sink, &retry.DeadLetterOptions{MaxErrors: -1}))
	require.ErrorIs(t, err, errDead)
	recs := sink.Records()
	require.Len(t, recs, 1)
	assert.Empty(t, recs[0].Errors)
	assert.Equal(t, "boom", recs[0].LastError)
	assert.Equal(t, 3, recs[0].Attempts)
}

func TestDeadLetterSinkFailureIsNotSilent(t *testing.T) {
	t.Parallel()
	errSink := errors.New("disk full")
	obs := &dlDoneRecorder{}
	err := retry.Do(t.Context(), func(context.Context) error { return errDead },
		retry.WithBackoff(retry.Constant(0)), retry.WithObserver(obs),
		retry.WithDeadLetter(deadletter.Func(func(context.Context, retry.DeadLetter) error { return errSink }), nil))

	assert.ErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
	assert.ErrorIs(t, err, errDead)
	assert.ErrorIs(t, err, retry.ErrExhausted)
	assert.ErrorIs(t, err, errSink)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.OutcomeExhausted, re.Outcome)
	assert.Equal(t, "retry: attempts exhausted after 3 attempts: boom (dead letter not recorded: disk full)", err.Error())
	done := obs.only(t)
	assert.True(t, done.DeadLetterFailed)
	assert.Equal(t, err, done.Err)
}

func TestDeadLetterFallback(t *testing.T) {
	t.Parallel()
	errPrimary, errFallback := errors.New("primary down"), errors.New("fallback down")
	failing := func(err error) retry.DeadLetterSink {
		return deadletter.Func(func(context.Context, retry.DeadLetter) error { return err })
	}

	t.Run("used_when_primary_fails", func(t *testing.T) {
		t.Parallel()
		fallback := deadletter.NewMemorySink()
		obs := &dlDoneRecorder{}
		err := retry.Do(t.Context(), func(context.Context) error { return retry.Permanent(errDead) },
			retry.WithObserver(obs), retry.WithDeadLetter(failing(errPrimary), &retry.DeadLetterOptions{Fallback: fallback}))
		assert.ErrorIs(t, err, errDead)
		assert.NotErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
		assert.Equal(t, 1, fallback.Len())
		assert.True(t, obs.only(t).DeadLettered)
	})
	t.Run("not_used_when_primary_works", func(t *testing.T) {
		t.Parallel()
		primary, fallback := deadletter.NewMemorySink(), deadletter.NewMemorySink()
		err := retry.Do(t.Context(), func(context.Context) error { return retry.Permanent(errDead) },
			retry.WithDeadLetter(primary, &retry.DeadLetterOptions{Fallback: fallback}))
		assert.ErrorIs(t, err, errDead)
		assert.Equal(t, 1, primary.Len())
		assert.Zero(t, fallback.Len())
	})
	t.Run("both_fail", func(t *testing.T) {
		t.Parallel()
		err := retry.Do(t.Context(), func(context.Context) error { return retry.Permanent(errDead) },
			retry.WithDeadLetter(failing(errPrimary), &retry.DeadLetterOptions{Fallback: failing(errFallback)}))
		assert.ErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
		assert.ErrorIs(t, err, errDead)
		assert.ErrorIs(t, err, errPrimary)
		assert.ErrorIs(t, err, errFallback)
		assert.Equal(t, "retry: permanent error after 1 attempt: boom (dead letter not recorded: primary down; fallback: fallback down)", err.Error())
	})
}

// TestDeadLetterHangingSink: a sink that never finishes on its own delays
// Do by exactly the sink timeout, per sink, and the caller's cancellation
// does not cut the sink's context short.
func TestDeadLetterHangingSink(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		hang := deadletter.Func(func(ctx context.Context, _ retry.DeadLetter) error {
			calls.Add(1)
			<-ctx.Done()
			return ctx.Err()
		})
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		// fn's context ends while it runs: an unknown outcome.
		err := retry.Do(ctx, func(context.Context) error { cancel(); return errDead },
			retry.WithDeadLetter(hang, &retry.DeadLetterOptions{Fallback: hang, On: []retry.Outcome{retry.OutcomeUnknown}, Timeout: 2 * time.Second}))
		assert.Equal(t, 4*time.Second, time.Since(start))
		assert.Equal(t, int32(2), calls.Load())
		assert.ErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, context.DeadlineExceeded) // the sinks' timeout
		assert.ErrorIs(t, err, errDead)
	})
}

func TestDeadLetterDefaultTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var deadline time.Time
		sink := deadletter.Func(func(ctx context.Context, _ retry.DeadLetter) error {
			deadline, _ = ctx.Deadline()
			return nil
		})
		start := time.Now()
		err := retry.Do(t.Context(), func(context.Context) error { return retry.Permanent(errDead) }, retry.WithDeadLetter(sink, nil))
		require.ErrorIs(t, err, errDead)
		assert.Equal(t, start.Add((5 * time.Second)), deadline)
	})
}

// TestDeadLetterNothingLost: 10,000 failing calls while the sink fails
// 100 % for a stretch and then recovers. Every call is either stored once
// or returns ErrDeadLetterNotRecorded, with the memory sink and with the
// file sink behind the fault injector.
func TestDeadLetterNothingLost(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"memory", "file"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) { nothingLost(t, store) })
		})
	}
}

func nothingLost(t *testing.T, store string) {
	const workers, perWorker = 100, 100
	var backend retry.DeadLetterSink
	var stored func() (recs []retry.DeadLetter, lines int)
	if store == "memory" {
		mem := deadletter.NewMemorySink()
		backend = mem
		stored = func() ([]retry.DeadLetter, int) { recs := mem.Records(); return recs, len(recs) }
	} else {
		path := filepath.Join(t.TempDir(), "deadletters.jsonl")
		file, err := deadletter.OpenFile(path, nil)
		require.NoError(t, err)
		defer file.Close()
		backend = file
		stored = func() ([]retry.DeadLetter, int) {
			recs, err := deadletter.ReadFile(path)
			require.NoError(t, err)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			return recs, bytes.Count(data, []byte("\n"))
		}
	}
	errDown := errors.New("sink down")
	start := time.Now()
	var failedPuts atomic.Int64
	sink := deadletter.Func(func(ctx context.Context, dl retry.DeadLetter) error {
		if since := time.Since(start); since >= 3*time.Second && since < 8*time.Second {
			failedPuts.Add(1)
			return errDown
		}
		return backend.Put(ctx, dl)
	})
	obs := &dlDoneRecorder{}
	r, err := retry.New(retry.WithDeadLetter(sink, nil), retry.WithObserver(obs), retry.WithMaxAttempts(2),
		retry.WithBackoff(retry.Constant(10*time.Millisecond)), retry.WithJitter(retry.NoJitter))
	require.NoError(t, err)

	var notRecorded, other atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range perWorker {
				var err error
				if i%2 == 0 {
					err = r.Do(t.Context(), func(context.Context) error { return errDead })
				} else {
					err = r.Do(t.Context(), func(context.Context) error { return retry.Permanent(errDead) })
				}
				switch {
				case errors.Is(err, retry.ErrDeadLetterNotRecorded) && errors.Is(err, errDead):
					notRecorded.Add(1)
				case !errors.Is(err, errDead):
					other.Add(1)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	wg.Wait()

	recs, lines := stored()
	t.Logf("%s: %d stored, %d returned ErrDeadLetterNotRecorded", store, lines, notRecorded.Load())
	ids := make(map[string]bool, len(recs))
	for _, dl := range recs {
		ids[dl.ID] = true
	}
	require.Positive(t, notRecorded.Load(), "the sink never failed: the test proves nothing")
	require.Positive(t, len(recs), "the sink never recovered")
	assert.Zero(t, other.Load())
	assert.Equal(t, notRecorded.Load(), failedPuts.Load())
	assert.Len(t, ids, lines, "duplicate records")
	assert.Equal(t, int64(workers*perWorker), int64(lines)+notRecorded.Load())

	// The observer sees the same split.
	status := map[string]int{}
	for _, d := range obs.done {
		switch {
		case d.DeadLettered:
			status["recorded"]++
		case d.DeadLetterFailed:
			status["failed"]++
		}
	}
	assert.Equal(t, map[string]int{"recorded": lines, "failed": int(notRecorded.Load())}, status)
}

func TestDeadLetterOptionsValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opt  retry.Option
		msg  string
	}{
		{"nil_sink", retry.WithDeadLetter(nil, nil), "WithDeadLetter(nil, opts)"},
		{"nil_fallback", retry.WithDeadLetter(deadletter.NewMemorySink(), &retry.DeadLetterOptions{Fallback: deadletter.Func(nil)}), "Fallback is"},
		{"success_outcome", retry.WithDeadLetter(deadletter.NewMemorySink(), &retry.DeadLetterOptions{On: []retry.Outcome{retry.OutcomeExhausted, retry.OutcomeSuccess}}), "On holds success"},
		{"unknown_outcome", retry.WithDeadLetter(deadletter.NewMemorySink(), &retry.DeadLetterOptions{On: []retry.Outcome{42}}), "On holds Outcome(42)"},
		{"negative_timeout", retry.WithDeadLetter(deadletter.NewMemorySink(), &retry.DeadLetterOptions{Timeout: -time.Second}), "Timeout is -1s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := retry.New(tc.opt)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

// TestDeadLetterWithDoesNotChangeParent: Retrier.With copies the
// dead-letter settings instead of sharing them.
func TestDeadLetterWithDoesNotChangeParent(t *testing.T) {
	t.Parallel()
	parentSink, childSink := deadletter.NewMemorySink(), deadletter.NewMemorySink()
	parent, err := retry.New(retry.WithDeadLetter(parentSink, nil), retry.WithMaxAttempts(1))
	require.NoError(t, err)
	child, err := parent.With(retry.WithDeadLetter(childSink, &retry.DeadLetterOptions{On: []retry.Outcome{retry.OutcomeCanceled}}))
	require.NoError(t, err)

	fail := func(context.Context) error { return errDead }
	require.Error(t, parent.Do(t.Context(), fail))
	require.Error(t, child.Do(t.Context(), fail))
	assert.Equal(t, 1, parentSink.Len())
	assert.Zero(t, childSink.Len(), "exhausted is not dead-lettered by the child")
}

func TestDeadLetterIdempotentEarlyExits(t *testing.T) {
	// A call refused before any attempt (store down, key reused) is work
	// not done: it is dead-lettered like any permanent failure. A replayed
	// permanent failure is not: the call that failed recorded it already.
	synctest.Test(t, func(t *testing.T) {
		sink := deadletter.NewMemorySink()
		store := newFaulty()
		run := func(payload string, fn func(context.Context) error) error {
			return retry.Do(t.Context(), fn, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "order-1"}), retry.WithPayload([]byte(payload)),
				retry.WithDeadLetter(sink, nil), retry.WithName("order"))
		}
		calls := 0
		fail := func(context.Context) error { calls++; return retry.Permanent(errDead) }

		require.ErrorIs(t, run("a", fail), errDead)
		require.Equal(t, 1, sink.Len(), "the permanent failure")

		err := run("a", fail)
		require.ErrorIs(t, err, retry.ErrReplayed)
		assert.Equal(t, 1, sink.Len(), "a replay is not recorded again")

		err = run("b", fail)
		require.ErrorIs(t, err, retry.ErrKeyReuse)
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, retry.OutcomePermanent, re.Outcome)
		assert.Equal(t, 0, re.Attempts)
		require.Equal(t, 2, sink.Len(), "key reuse is recorded")

		store.mu.Lock()
		store.claimErr = errors.New("connection refused")
		store.mu.Unlock()
		err = run("a", fail)
		require.ErrorIs(t, err, retry.ErrIdempotencyUnavailable)
		records := sink.Records()
		require.Len(t, records, 3, "store unavailable is recorded")
		assert.Equal(t, retry.OutcomePermanent, records[2].Reason)
		assert.Equal(t, "order-1", records[2].IdempotencyKey)
		assert.Equal(t, []byte("a"), records[2].Payload)
		assert.Contains(t, records[2].LastError, "connection refused")
		assert.Equal(t, 1, calls, "fn ran only the first time")
	})
}

// A deadline that passed before the first attempt is not dead-lettered by
// default (nothing was attempted, and the caller knows it), while one
// that came after an attempt is.
func TestDeadLetterDeadlineCountsOnceAnAttemptWasMade(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sink := deadletter.NewMemorySink()
		r := mustNew(t, retry.WithDeadLetter(sink, nil))
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		time.Sleep(2 * time.Second)
		err := r.Do(ctx, func(context.Context) error { return errDead })
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, retry.OutcomeDeadline, re.Outcome)
		assert.Zero(t, re.Attempts)
		assert.Zero(t, sink.Len())

		r = mustNew(t, retry.WithDeadLetter(sink, &retry.DeadLetterOptions{On: []retry.Outcome{retry.OutcomeDeadline}}))
		_ = r.Do(ctx, func(context.Context) error { return errDead })
		assert.Equal(t, 1, sink.Len(), "an On that lists OutcomeDeadline keeps every deadline")
	})
}

// A sink that ignores its context cannot keep Do from returning: Do stops
// waiting at the timeout (and a short grace) and reports the dead letter
// as not recorded; with 16 such Puts running, a call waits its timeout for
// one to end, then counts the sink as failed without starting another.
func TestDeadLetterSinkThatIgnoresItsContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		release := make(chan struct{})
		hang := deadletter.Func(func(context.Context, retry.DeadLetter) error {
			calls.Add(1)
			<-release // ignores ctx
			return nil
		})
		r := mustNew(t, retry.WithDeadLetter(hang, &retry.DeadLetterOptions{Timeout: time.Second}))
		for i := range 20 {
			start := time.Now()
			err := r.Do(t.Context(), func(context.Context) error { return retry.Permanent(errDead) })
			require.ErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
			require.ErrorIs(t, err, errDead)
			if i < 16 {
				assert.Equal(t, time.Second+50*time.Millisecond, time.Since(start), "Do waits the timeout and a grace, no more")
			} else {
				assert.Equal(t, time.Second, time.Since(start), "16 Puts still run: the call waits its timeout for one, starts none")
			}
		}
		assert.Equal(t, int32(16), calls.Load())
		close(release)
		synctest.Wait()
		err := r.Do(t.Context(), func(context.Context) error { return retry.Permanent(errDead) })
		assert.NotErrorIs(t, err, retry.ErrDeadLetterNotRecorded, "the Puts left running ended: the sink is called again")
		assert.Equal(t, int32(17), calls.Load())
	})
}

// The bound on Puts holds for calls that fail at once too: with a sink
// that ignores its context, no more than 16 Puts of one WithDeadLetter run,
// however many calls fail together (found by review).
func TestDeadLetterPutsBoundedUnderConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var puts atomic.Int32
		release := make(chan struct{})
		hang := deadletter.Func(func(context.Context, retry.DeadLetter) error {
			puts.Add(1)
			<-release // ignores ctx
			return nil
		})
		r := mustNew(t, retry.WithDeadLetter(hang, &retry.DeadLetterOptions{Timeout: time.Second}))
		var wg sync.WaitGroup
		for range 40 {
			wg.Go(func() {
				err := r.Do(context.Background(), func(context.Context) error { return retry.Permanent(errDead) })
				assert.ErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
			})
		}
		wg.Wait()
		running := puts.Load() // none has returned: all still run
		close(release)
		synctest.Wait()
		assert.Equal(t, int32(16), running, "Puts running at once")
	})
}

// A sink that panics does not crash the process from the Put's goroutine:
// the panic is that sink's failure, the fallback is tried, and Do's error
// says the dead letter was not recorded when no sink stored it. The
// panic's value stays out of the text (it may hold the record).
func TestDeadLetterSinkPanicIsItsFailure(t *testing.T) {
	t.Parallel()
	bad := deadletter.Func(func(context.Context, retry.DeadLetter) error { panic("sink bug: " + "secret-payload") })
	r := mustNew(t, retry.WithDeadLetter(bad, nil))
	err := r.Do(t.Context(), func(context.Context) error { return retry.Permanent(errDead) })
	require.ErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
	assert.ErrorContains(t, err, "the dead-letter sink panicked (string)")
	assert.NotContains(t, err.Error(), "secret-payload")

	fallback := deadletter.NewMemorySink()
	r = mustNew(t, retry.WithDeadLetter(bad, &retry.DeadLetterOptions{Fallback: fallback}))
	err = r.Do(t.Context(), func(context.Context) error { return retry.Permanent(errDead) })
	assert.NotErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
	assert.Equal(t, 1, fallback.Len(), "the fallback stored it")
}

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

func TestDeadLetter_largeMaxErrorsKeepsTheErrorsMade(t *testing.T) {
	sink := deadletter.NewMemorySink()
	r := mustNew(t, retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)),
		retry.WithDeadLetter(sink, &retry.DeadLetterOptions{MaxErrors: math.MaxInt}))
	err := r.Do(context.Background(), func(context.Context) error { return errTransient })
	require.Error(t, err)
	require.Equal(t, 1, sink.Len())
	assert.Len(t, sink.Records()[0].Errors, 3)
}

// TestDeadLetterSuccessAllocatesNothing: with a sink configured, a call
// that succeeds at once still makes no allocation.
func TestDeadLetterSuccessAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates; run without -race")
	}
	r, err := retry.New(retry.WithDeadLetter(deadletter.NewMemorySink(), nil))
	require.NoError(t, err)
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = r.Do(ctx, fn) }))
}
