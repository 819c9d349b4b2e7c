package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
)

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
			r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)))
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

// selfFirstTree is a tree whose first child is itself.
type selfFirstTree struct{}

func (*selfFirstTree) Error() string     { return "tree" }
func (e *selfFirstTree) Unwrap() []error { return []error{e, errTransient} }

func TestDo_errorTreeWhoseFirstChildIsItselfEndsTheCall(t *testing.T) {
	r := mustNew(t, retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)))
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
