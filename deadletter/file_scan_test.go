package deadletter_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

// TestFileSinkScanPending: ScanPending passes what Pending returns, in
// the order written, reports torn lines first, and is not disturbed by
// fn writing to the file: marks and new records appended while it reads
// are left out, as they would be from Pending's slice.
func TestFileSinkScanPending(t *testing.T) {
	t.Parallel()
	var heard []*deadletter.TornRecordError
	sink, path := openFileSink(t, &deadletter.FileOptions{OnTorn: func(e *deadletter.TornRecordError) { heard = append(heard, e) }})
	// Written newest first: the order written is not the order of GaveUp.
	for i := 4; i >= 0; i-- {
		require.NoError(t, sink.Put(t.Context(), testRecord(i)))
	}
	appendRaw(t, path, "garbage\n")
	ok, err := sink.MarkRedriven(t.Context(), testRecord(3).ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, sink.Put(t.Context(), testRecord(0)), "a copy is passed once")

	want, err := sink.Pending(t.Context())
	require.NoError(t, err)
	require.Len(t, heard, 1)
	var ids []string
	for _, dl := range want {
		ids = append(ids, dl.ID)
	}
	assert.Equal(t, []string{testRecord(4).ID, testRecord(2).ID, testRecord(1).ID, testRecord(0).ID}, ids)

	var got []retry.DeadLetter
	err = sink.ScanPending(t.Context(), func(dl retry.DeadLetter) error {
		assert.Len(t, heard, 2, "torn lines are reported before the first record")
		got = append(got, dl)
		ok, err := sink.MarkRedriven(t.Context(), dl.ID)
		require.NoError(t, err)
		assert.True(t, ok, "still pending when passed")
		again := dl
		again.ID = deadletter.NewID()
		return sink.Put(t.Context(), again)
	})
	require.NoError(t, err)
	assert.Equal(t, want, got)

	pending, err := sink.Pending(t.Context())
	require.NoError(t, err)
	assert.Len(t, pending, 4, "only the records written during the scan")
	for i, dl := range pending {
		assert.Equal(t, want[i].Payload, dl.Payload)
	}

	errStop := fmt.Errorf("stop")
	calls := 0
	err = sink.ScanPending(t.Context(), func(retry.DeadLetter) error { calls++; return errStop })
	assert.ErrorIs(t, err, errStop)
	assert.Equal(t, 1, calls)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = sink.ScanPending(ctx, func(retry.DeadLetter) error { t.Error("called after the context ended"); return nil })
	assert.ErrorIs(t, err, context.Canceled)
}
