package retry_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/memstore"
)

// The errors fn returns are the caller's: Do must report, log and
// dead-letter a failed call whatever they do.

// nilPtrError's Error method dereferences its receiver, so a typed nil
// one panics when asked for its text.
type nilPtrError struct{ msg string }

func (e *nilPtrError) Error() string { return e.msg }

func TestDo_typedNilErrorIsReportedAndDeadLettered(t *testing.T) {
	sink := deadletter.NewMemorySink()
	r := mustNew(t, retry.WithMaxAttempts(2), retry.WithBackoff(retry.Constant(0)),
		retry.WithDeadLetter(sink, nil),
		retry.WithIdempotency(memstore.New(nil), &retry.IdempotencyOptions{Key: "job-1"}))
	var calls int
	err := r.Do(context.Background(), func(context.Context) error {
		calls++
		var e *nilPtrError
		if calls == 2 {
			return retry.Permanent(e)
		}
		return e // a non-nil error holding a nil pointer
	})
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.OutcomePermanent, re.Outcome)
	assert.Equal(t, 2, calls)
	assert.Equal(t, "retry: permanent error after 2 attempts: <nil>", err.Error())
	require.Equal(t, 1, sink.Len())
	dl := sink.Records()[0]
	assert.Equal(t, "<nil>", dl.LastError)
	require.Len(t, dl.Errors, 2)
	assert.Equal(t, "<nil>", dl.Errors[0].Error)
}

// selfError is a chain that loops: its Unwrap returns itself.
type selfError struct{}

func (*selfError) Error() string   { return "self" }
func (e *selfError) Unwrap() error { return e }

// selfTree is a tree that holds itself.
type selfTree struct{}

func (*selfTree) Error() string     { return "tree" }
func (e *selfTree) Unwrap() []error { return []error{errTransient, e} }

func TestDo_errorChainThatLoopsEndsTheCall(t *testing.T) {
	for name, loop := range map[string]error{"Unwrap() error": &selfError{}, "Unwrap() []error": &selfTree{}} {
		t.Run(name, func(t *testing.T) {
			r := mustNew(t, retry.WithBudget(nil), retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)))
			done := make(chan error, 1)
			go func() {
				done <- r.Do(context.Background(), func(context.Context) error { return loop })
			}()
			select {
			case err := <-done:
				var re *retry.Error
				require.ErrorAs(t, err, &re)
				assert.Equal(t, retry.OutcomeExhausted, re.Outcome)
				assert.Equal(t, 3, re.Attempts)
				assert.False(t, retry.IsPermanent(loop))
			case <-time.After(10 * time.Second): // a safety net, not a wait: the call takes microseconds
				t.Fatal("Do did not return: it walks the looping chain for ever")
			}
		})
	}
}

func TestDo_deepChainStillFindsItsMarker(t *testing.T) {
	err := retry.Permanent(errTransient)
	for range 1000 {
		err = &wrapped{err}
	}
	assert.True(t, retry.IsPermanent(err))
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

func TestError_builtByHandWithoutCause(t *testing.T) {
	assert.Equal(t, "retry: deadline before the first attempt", (&retry.Error{Outcome: retry.OutcomeDeadline}).Error())
	assert.Equal(t, "retry: canceled after 2 attempts: transient",
		(&retry.Error{Outcome: retry.OutcomeCanceled, Attempts: 2, Last: errTransient}).Error())
}

// An error that joins two inner calls' errors ends the outer call as the
// one that gave up did, not as the first *Error in the chain.
func TestNested_joinedErrorsEndAsTheInnerGiveUp(t *testing.T) {
	ctx := context.Background()
	expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	inner := mustNew(t, retry.WithMaxAttempts(1))
	deadline := inner.Do(expired, failOnce)
	exhausted := inner.Do(ctx, failOnce)
	var d, x *retry.Error
	require.ErrorAs(t, deadline, &d)
	require.ErrorAs(t, exhausted, &x)
	require.Equal(t, retry.OutcomeDeadline, d.Outcome)
	require.Equal(t, retry.OutcomeExhausted, x.Outcome)

	outer := mustNew(t, retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)))
	var calls int
	err := outer.Do(ctx, func(context.Context) error { calls++; return errors.Join(deadline, exhausted) })
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 1, calls)
	assert.Equal(t, retry.OutcomeExhausted, re.Outcome)
	assert.ErrorIs(t, err, retry.ErrExhausted)
	assert.NotErrorIs(t, re.Cause, context.DeadlineExceeded)
}

// A call whose context ends while it waits keeps both the context's error
// and its cause, whatever combination the standard contexts make of them,
// and its outcome follows the context's error (unknown when the context
// ends during an attempt: fn may have acted).
func TestDo_contextEndsInAWaitWithEveryKindOfCause(t *testing.T) {
	custom := errors.New("shutting down")
	for name, tc := range map[string]struct {
		end       func(parent context.Context) (context.Context, func())
		outcome   retry.Outcome
		is        []error
		inAttempt bool // the context ends during the attempt (a deadline never ends a wait: Do stops before it)
	}{
		"cancel": {func(p context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancel(p)
			time.AfterFunc(time.Second, cancel)
			return ctx, cancel
		}, retry.OutcomeCanceled, []error{context.Canceled}, false},
		"cancel with a cause": {func(p context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(p)
			time.AfterFunc(time.Second, func() { cancel(custom) })
			return ctx, func() { cancel(nil) }
		}, retry.OutcomeCanceled, []error{context.Canceled, custom}, false},
		"cancel with DeadlineExceeded as the cause": {func(p context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(p)
			time.AfterFunc(time.Second, func() { cancel(context.DeadlineExceeded) })
			return ctx, func() { cancel(nil) }
		}, retry.OutcomeCanceled, []error{context.Canceled, context.DeadlineExceeded}, false},
		"deadline with Canceled as the cause": {func(p context.Context) (context.Context, func()) {
			return context.WithDeadlineCause(p, time.Now().Add(time.Second), context.Canceled)
		}, retry.OutcomeUnknown, []error{context.DeadlineExceeded, context.Canceled, retry.ErrOutcomeUnknown}, true},
		"cancel under a deadline": {func(p context.Context) (context.Context, func()) {
			d, stop := context.WithTimeout(p, time.Hour)
			ctx, cancel := context.WithCancel(d)
			time.AfterFunc(time.Second, cancel)
			return ctx, func() { cancel(); stop() }
		}, retry.OutcomeCanceled, []error{context.Canceled}, false},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, stop := tc.end(t.Context())
				defer stop()
				// A wait of 30 minutes: the deadline of an hour does not stop it early.
				r := mustNew(t, retry.WithBackoff(retry.Constant(30*time.Minute)), retry.WithJitter(retry.NoJitter))
				fn := failOnce
				if tc.inAttempt {
					fn = func(ctx context.Context) error { <-ctx.Done(); return errTransient }
				}
				err := r.Do(ctx, fn)
				var re *retry.Error
				require.ErrorAs(t, err, &re)
				assert.Equal(t, tc.outcome, re.Outcome)
				for _, target := range tc.is {
					assert.ErrorIs(t, err, target)
				}
				assert.ErrorIs(t, err, errTransient)
			})
		})
	}
}

// selfFirstTree is a tree whose first child is itself.
type selfFirstTree struct{}

func (*selfFirstTree) Error() string     { return "tree" }
func (e *selfFirstTree) Unwrap() []error { return []error{e, errTransient} }

func TestDo_errorTreeWhoseFirstChildIsItselfEndsTheCall(t *testing.T) {
	r := mustNew(t, retry.WithBudget(nil), retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)))
	err := r.Do(context.Background(), func(context.Context) error { return &selfFirstTree{} })
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.OutcomeExhausted, re.Outcome)
	assert.False(t, retry.IsPermanent(&selfFirstTree{}))
}

// An inner give-up at the very end of the links looked at: classify and
// the lookup of the inner *Error may part there; the call still ends.
func TestNested_innerGaveUpAtTheBoundOfTheLinks(t *testing.T) {
	inner := mustNew(t, retry.WithMaxAttempts(1))
	exhausted := inner.Do(context.Background(), failOnce)
	errs := make([]error, 0, 1<<14)
	for range 1<<14 - 1 {
		errs = append(errs, errors.New("plain"))
	}
	errs = append(errs, exhausted)
	outer := mustNew(t, retry.WithMaxAttempts(2), retry.WithBackoff(retry.Constant(0)))
	err := outer.Do(context.Background(), func(context.Context) error { return errors.Join(errs...) })
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.OutcomeExhausted, re.Outcome)
}
