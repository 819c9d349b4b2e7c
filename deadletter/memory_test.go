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
	require.NoError(t, sink.Put(t.Context(), retry.DeadLetter{ID: "1", Payload: payload}))
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
	require.NoError(t, sink.Put(t.Context(), retry.DeadLetter{ID: "1"}))
	require.NoError(t, sink.Put(t.Context(), retry.DeadLetter{ID: "2"}))
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
