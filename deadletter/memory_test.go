package deadletter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

func TestMemorySinkCopies(t *testing.T) {
	t.Parallel()
	sink := deadletter.NewMemorySink()
	payload := []byte("abc")
	require.NoError(t, sink.Put(t.Context(), retry.DeadLetter{ID: "1", Payload: payload, Reason: retry.OutcomeExhausted}))
	payload[0] = 'X'
	got := sink.Records()
	require.Len(t, got, 1)
	assert.Equal(t, []byte("abc"), got[0].Payload)
	got[0].Payload[0] = 'Y'
	assert.Equal(t, []byte("abc"), sink.Records()[0].Payload)
}

// TestMemorySinkMarksOnce: MarkRedriven returns true once per record,
// as Source requires. (Redrive lists only pending records, so the redrive
// tests never mark one twice.)
func TestMemorySinkMarksOnce(t *testing.T) {
	t.Parallel()
	sink := deadletter.NewMemorySink()
	require.NoError(t, sink.Put(t.Context(), retry.DeadLetter{ID: "1", Reason: retry.OutcomeExhausted}))
	require.NoError(t, sink.Put(t.Context(), retry.DeadLetter{ID: "2", Reason: retry.OutcomeExhausted}))
	ok, err := sink.MarkRedriven(t.Context(), "1")
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = sink.MarkRedriven(t.Context(), "1")
	require.NoError(t, err)
	assert.False(t, ok, "marked twice")
	ok, err = sink.MarkRedriven(t.Context(), "unknown")
	require.NoError(t, err)
	assert.False(t, ok, "marked an unknown record")
	pending, err := sink.Pending(t.Context())
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, "2", pending[0].ID)
}

func TestMemorySinkHonoursContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	sink := deadletter.NewMemorySink()
	assert.ErrorIs(t, sink.Put(ctx, retry.DeadLetter{ID: "1"}), context.Canceled)
	assert.Zero(t, sink.Len())
}

// TestSinksKeepTheFirstRecordOfAnID: a second Put with a stored ID (a
// Put retried after a timeout, say) leaves the first record alone, in a
// MemorySink as in a FileSink, so Redrive replays it once and nothing
// stays pending. The old MemorySink kept both: Redrive replayed the
// first but MarkRedriven marked the second (the ID's newest index), so
// the first stayed pending for ever and counted as Skipped on every run.
func TestSinksKeepTheFirstRecordOfAnID(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(*testing.T) deadletter.Source{
		"memory": func(*testing.T) deadletter.Source { return deadletter.NewMemorySink() },
		"file":   func(t *testing.T) deadletter.Source { s, _ := openFileSink(t, nil); return s },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sink := open(t)
			first, second := testRecord(0), testRecord(0)
			second.Payload = []byte("second")
			require.NoError(t, sink.Put(t.Context(), first))
			require.NoError(t, sink.Put(t.Context(), second), "a duplicate is not an error")

			var replayed []string
			handler := func(_ context.Context, dl retry.DeadLetter) error {
				replayed = append(replayed, string(dl.Payload))
				return nil
			}
			rep, err := deadletter.Redrive(t.Context(), sink, redriver(t), handler, nil)
			require.NoError(t, err)
			assert.Equal(t, deadletter.Report{Pending: 1, Succeeded: 1}, rep)
			rep, err = deadletter.Redrive(t.Context(), sink, redriver(t), handler, nil)
			require.NoError(t, err)
			assert.Equal(t, deadletter.Report{}, rep, "nothing left after the first run")
			assert.Equal(t, []string{string(first.Payload)}, replayed, "the first record wins, replayed once")
			pending, err := sink.Pending(t.Context())
			require.NoError(t, err)
			assert.Empty(t, pending)
		})
	}
}

// TestMemorySinkRejectsRecordWithoutID: records are kept by ID, so one
// without is refused, as by a FileSink, rather than lost on a second Put.
func TestMemorySinkRejectsRecordWithoutID(t *testing.T) {
	t.Parallel()
	sink := deadletter.NewMemorySink()
	err := sink.Put(t.Context(), retry.DeadLetter{Name: "charge"})
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.Contains(t, err.Error(), "no ID")
	assert.Zero(t, sink.Len())
}

// TestMemorySinkZeroValue: the zero MemorySink works like
// NewMemorySink's; the old code panicked in Put on its nil map.
func TestMemorySinkZeroValue(t *testing.T) {
	t.Parallel()
	var sink deadletter.MemorySink
	require.NotPanics(t, func() {
		pending, err := sink.Pending(t.Context())
		require.NoError(t, err)
		assert.Empty(t, pending)
		ok, err := sink.MarkRedriven(t.Context(), "1")
		require.NoError(t, err)
		assert.False(t, ok)
		require.NoError(t, sink.Put(t.Context(), testRecord(0)))
	})
	assert.Equal(t, 1, sink.Len())
	var replayed int
	rep, err := deadletter.Redrive(t.Context(), &sink, redriver(t), func(context.Context, retry.DeadLetter) error { replayed++; return nil }, nil)
	require.NoError(t, err)
	assert.Equal(t, deadletter.Report{Pending: 1, Succeeded: 1}, rep)
	assert.Equal(t, 1, replayed)
}
