package deadletter_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/memstore"
)

// TestRedriveOfAStoredFailureKeepsTheRecord: when a record's idempotency
// key holds a stored failure (a permanent one, or an exhausted one kept
// with KeepFailures), the replay under that key only replays the failure.
// The record is marked redriven all the same, so the replay is
// dead-lettered anew: the work stays pending, for a redrive without the
// store.
func TestRedriveOfAStoredFailureKeepsTheRecord(t *testing.T) {
	for name, tc := range map[string]struct {
		opts *retry.IdempotencyOptions
		fail error
	}{
		"permanent":                   {nil, retry.Permanent(errDead)},
		"exhausted with KeepFailures": {&retry.IdempotencyOptions{KeepFailures: true}, errDead},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sink := deadletter.NewMemorySink()
			r := redriver(t, retry.WithIdempotency(memstore.New(nil), tc.opts), retry.WithDeadLetter(sink, nil), retry.WithMaxAttempts(2))
			ctx := retry.ContextWithIdempotencyKey(t.Context(), "order-1")
			require.ErrorIs(t, r.Do(ctx, func(context.Context) error { return tc.fail }), errDead)
			recs := sink.Records()
			require.Len(t, recs, 1)
			old := recs[0]

			var c replayCounter
			rep, err := deadletter.Redrive(t.Context(), sink, r, c.handler(nil), nil)
			require.NoError(t, err)
			assert.Equal(t, deadletter.Report{Pending: 1, Replayed: 1}, rep)
			assert.Empty(t, c.snapshot(), "the stored failure is replayed: the handler is not called")

			pending, err := sink.Pending(t.Context())
			require.NoError(t, err)
			require.Len(t, pending, 1, "the record is not lost")
			again := pending[0]
			assert.Equal(t, old.ID, again.RedriveOf)
			assert.Equal(t, 1, again.Redrives)
			assert.Equal(t, "order-1", again.IdempotencyKey)
			assert.Equal(t, retry.OutcomePermanent, again.Reason)
			assert.Equal(t, "boom", again.LastError, "the stored failure's text")
			assert.Zero(t, again.Attempts)

			// Without the store the work is done at last.
			plain := redriver(t, retry.WithDeadLetter(sink, nil))
			rep, err = deadletter.Redrive(t.Context(), sink, plain, c.handler(nil), nil)
			require.NoError(t, err)
			assert.Equal(t, deadletter.Report{Pending: 1, Succeeded: 1}, rep)
			assert.Equal(t, map[string]int{again.ID: 1}, c.snapshot())
			pending, err = sink.Pending(t.Context())
			require.NoError(t, err)
			assert.Empty(t, pending)
		})
	}
}

// TestRedriveLeavesARecordItCannotReplayPending: a record whose key Do
// would refuse (over 255 bytes) is neither marked nor replayed: it stays
// pending, counted in Report.Invalid, with the reason in the error and
// not the key. Before, it was marked, then refused, and lost.
func TestRedriveLeavesARecordItCannotReplayPending(t *testing.T) {
	sink := deadletter.NewMemorySink()
	key := strings.Repeat("k", 300)
	require.NoError(t, sink.Put(t.Context(), retry.DeadLetter{ID: "0123456789abcdef0123456789abcdef", Name: "charge",
		IdempotencyKey: key, Payload: []byte("work"), Reason: retry.OutcomeExhausted}))
	r := redriver(t, retry.WithIdempotency(memstore.New(nil), nil))

	var c replayCounter
	rep, err := deadletter.Redrive(t.Context(), sink, r, c.handler(nil), nil)
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.Contains(t, err.Error(), "left pending")
	assert.Contains(t, err.Error(), "300 bytes long")
	assert.NotContains(t, err.Error(), key)
	assert.Equal(t, deadletter.Report{Pending: 1, Invalid: 1}, rep)
	assert.Empty(t, c.snapshot(), "the handler is not called")

	pending, err := sink.Pending(t.Context())
	require.NoError(t, err)
	require.Len(t, pending, 1, "the record is not lost")
	assert.Equal(t, key, pending[0].IdempotencyKey)

	// Without the store it is replayed at last.
	rep, err = deadletter.Redrive(t.Context(), sink, redriver(t), c.handler(nil), nil)
	require.NoError(t, err)
	assert.Equal(t, deadletter.Report{Pending: 1, Succeeded: 1}, rep)
}

// A replay that ran and failed with an error that wraps ErrInvalidOption
// (the handler's own) was dead-lettered anew: it counts as Failed, not as a
// record marked and never replayed.
func TestRedriveOfAFailureThatWrapsErrInvalidOption(t *testing.T) {
	sink := deadletter.NewMemorySink()
	require.NoError(t, sink.Put(t.Context(), retry.DeadLetter{ID: deadletter.NewID(), Name: "charge", Payload: []byte("work"), Reason: retry.OutcomeExhausted}))
	handler := func(context.Context, retry.DeadLetter) error {
		return retry.Permanent(fmt.Errorf("config: %w", retry.ErrInvalidOption))
	}
	rep, err := deadletter.Redrive(t.Context(), sink, redriver(t), handler, nil)
	require.NoError(t, err)
	assert.Equal(t, deadletter.Report{Pending: 1, Failed: 1}, rep)
	assert.Equal(t, 2, sink.Len(), "the replay is dead-lettered anew")
}
