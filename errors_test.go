package retry_test

import (
	"context"
	"testing"

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

func TestError_builtByHandWithoutCause(t *testing.T) {
	assert.Equal(t, "retry: deadline before the first attempt", (&retry.Error{Outcome: retry.OutcomeDeadline}).Error())
	assert.Equal(t, "retry: canceled after 2 attempts: transient",
		(&retry.Error{Outcome: retry.OutcomeCanceled, Attempts: 2, Last: errTransient}).Error())
}
