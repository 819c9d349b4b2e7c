package retry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
)

// TestNew_rejectsOptionsThatDoNothingAlone: an option that only tunes
// idempotency or dead letters is a mistake without the store or sink it
// tunes, and is reported instead of silently doing nothing.
func TestNew_rejectsOptionsThatDoNothingAlone(t *testing.T) {
	cases := []struct {
		name string
		opt  retry.Option
		want string
	}{
		{"idempotency_wait", retry.WithIdempotencyWait(true), "WithIdempotencyWait without WithIdempotency"},
		{"idempotency_wait_false", retry.WithIdempotencyWait(false), "WithIdempotencyWait without WithIdempotency"},
		{"idempotency_lease", retry.WithIdempotencyLease(time.Minute), "WithIdempotencyLease without WithIdempotency"},
		{"idempotency_retention", retry.WithIdempotencyRetention(time.Hour), "WithIdempotencyRetention without WithIdempotency"},
		{"idempotency_store_timeout", retry.WithIdempotencyStoreTimeout(time.Second), "WithIdempotencyStoreTimeout without WithIdempotency"},
		{"idempotency_fail_open", retry.WithIdempotencyFailOpen(true), "WithIdempotencyFailOpen without WithIdempotency"},
		{"idempotency_keep_failures", retry.WithIdempotencyKeepFailures(true), "WithIdempotencyKeepFailures without WithIdempotency"},
		{"idempotency_codec", retry.WithIdempotencyCodec(retry.JSONCodec{}), "WithIdempotencyCodec without WithIdempotency"},
		{"dead_letter_on", retry.WithDeadLetterOn(retry.OutcomeDeadline), "WithDeadLetterOn without WithDeadLetter"},
		{"dead_letter_errors", retry.WithDeadLetterErrors(3), "WithDeadLetterErrors without WithDeadLetter"},
		{"dead_letter_timeout", retry.WithDeadLetterTimeout(time.Second), "WithDeadLetterTimeout without WithDeadLetter"},
		{"dead_letter_fallback", retry.WithDeadLetterFallback(retry.NewMemoryDeadLetterSink()), "WithDeadLetterFallback without WithDeadLetter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := retry.New(tc.opt)
			assert.Nil(t, r)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.ErrorContains(t, err, tc.want)

			calls := 0
			err = retry.Do(t.Context(), func(context.Context) error { calls++; return nil }, tc.opt)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.ErrorContains(t, err, tc.want)
			assert.Zero(t, calls, "fn must not be called")

			// Retrier.With checks the combined config: the base has no
			// store or sink either.
			with, err := mustNew(t, retry.WithMaxAttempts(2)).With(tc.opt)
			assert.Nil(t, with)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestNew_tuningOptionsWorkInAnyOrderAndOnTopOfABase(t *testing.T) {
	store := retry.NewMemoryIdempotencyStore()
	sink := retry.NewMemoryDeadLetterSink()
	tuning := []retry.Option{
		retry.WithIdempotencyWait(true), retry.WithIdempotencyLease(time.Minute), retry.WithIdempotencyRetention(time.Hour),
		retry.WithIdempotencyStoreTimeout(time.Second), retry.WithIdempotencyFailOpen(true), retry.WithIdempotencyKeepFailures(true),
		retry.WithIdempotencyCodec(retry.JSONCodec{}),
		retry.WithDeadLetterOn(retry.OutcomeExhausted), retry.WithDeadLetterErrors(3), retry.WithDeadLetterTimeout(time.Second),
		retry.WithDeadLetterFallback(retry.NewMemoryDeadLetterSink()),
	}
	before := append(append([]retry.Option(nil), tuning...), retry.WithIdempotency(store, "k"), retry.WithDeadLetter(sink))
	_, err := retry.New(before...)
	require.NoError(t, err, "tuning options may come before the store and the sink")

	base := mustNew(t, retry.WithIdempotency(store, "k"), retry.WithDeadLetter(sink))
	_, err = base.With(tuning...)
	require.NoError(t, err, "With adds tuning options to a base that has the store and the sink")
}

// TestRedrive_keylessRecordWithTunedIdempotency: a keyless record is
// replayed without the store even when the Retrier tunes idempotency, and
// that is not mistaken for tuning options without a store.
func TestRedrive_keylessRecordWithTunedIdempotency(t *testing.T) {
	store := retry.NewMemoryIdempotencyStore()
	src := retry.NewMemoryDeadLetterSink()
	dl := testRecord(0)
	dl.IdempotencyKey = ""
	require.NoError(t, src.Put(t.Context(), dl))
	var c replayCounter
	r := redriver(t, retry.WithIdempotency(store, "shared"), retry.WithIdempotencyLease(time.Minute), retry.WithIdempotencyWait(true))
	rep, err := retry.Redrive(t.Context(), src, r, c.handler(nil), nil)
	require.NoError(t, err)
	assert.Equal(t, retry.RedriveReport{Pending: 1, Succeeded: 1}, rep)
	assert.Zero(t, store.Len())
}
