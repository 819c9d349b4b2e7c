package deadletter_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

// TestTornRecordErrorIsBounded: the error of a file of torn lines counts
// them and names the first 8, however many there are (issue #20: 10 MB
// of "x\n" made a 42 MB error, every offset in it).
func TestTornRecordErrorIsBounded(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "garbage.jsonl")
	const lines = 5 << 20 // 10 MB
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte("x\n"), lines), 0o600))
	recs, err := deadletter.ReadFile(path)
	assert.Empty(t, recs)
	var torn *deadletter.TornRecordError
	require.ErrorAs(t, err, &torn)
	assert.Less(t, len(err.Error()), 512, "the error's size")
	assert.Equal(t, lines, torn.Count)
	assert.Equal(t, []int64{0, 2, 4, 6, 8, 10, 12, 14}, torn.Offsets)
	assert.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8}, torn.Lines)
	assert.Equal(t, fmt.Sprintf("deadletter: file %s: %d torn records skipped, at byte offset 0, 2, 4, 6, 8, 10, 12, 14 (lines 1, 2, 3, 4, 5, 6, 7, 8) and %d more", path, lines, lines-8), err.Error())
}

// TestTornRecordErrorNamesLines: a few torn lines are all named, with
// their line numbers.
func TestTornRecordErrorNamesLines(t *testing.T) {
	t.Parallel()
	sink, path := openFileSink(t, nil)
	require.NoError(t, sink.Put(t.Context(), testRecord(0)))
	appendRaw(t, path, "garbage\n")
	require.NoError(t, sink.Put(t.Context(), testRecord(1)))
	appendRaw(t, path, "{\"id\":\n")
	_, err := deadletter.ReadFile(path)
	var torn *deadletter.TornRecordError
	require.ErrorAs(t, err, &torn)
	assert.Equal(t, []int{2, 4}, torn.Lines)
	assert.Equal(t, 2, torn.Count)
	assert.Contains(t, err.Error(), "2 torn records skipped, at byte offset ")
	assert.Contains(t, err.Error(), " (lines 2, 4)")
	assert.NotContains(t, err.Error(), "more")

	// A TornRecordError built by hand, without Count, counts its offsets.
	assert.Equal(t, "deadletter: file f: 1 torn record skipped, at byte offset 7", (&deadletter.TornRecordError{Path: "f", Offsets: []int64{7}}).Error())
}

// TestFileSinkReportsTornLinesItSkips: Pending and Purge skip torn lines
// without an error, as they must (a line being written looks torn), but
// no longer without a word: OnTorn hears of them.
func TestFileSinkReportsTornLinesItSkips(t *testing.T) {
	t.Parallel()
	var heard []*deadletter.TornRecordError
	sink, path := openFileSink(t, &deadletter.FileOptions{OnTorn: func(e *deadletter.TornRecordError) { heard = append(heard, e) }})
	require.NoError(t, sink.Put(t.Context(), testRecord(0)))
	appendRaw(t, path, "garbage\n")
	require.NoError(t, sink.Put(t.Context(), testRecord(1)))

	pending, err := sink.Pending(t.Context())
	require.NoError(t, err)
	assert.Len(t, pending, 2)
	require.Len(t, heard, 1, "Pending")
	assert.Equal(t, []int{2}, heard[0].Lines)
	assert.Equal(t, path, heard[0].Path)

	n, err := sink.Purge(t.Context(), deadletter.Filter{IDs: []string{testRecord(0).ID}})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.Len(t, heard, 2, "Purge")
	assert.Equal(t, []int{2}, heard[1].Lines)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(data), "garbage\n"), "the torn line is kept")
}

// TestScanFile: ScanFile passes the records List returns, in its order,
// and stops at fn's error.
func TestScanFile(t *testing.T) {
	t.Parallel()
	sink, path := openFileSink(t, nil)
	for _, i := range []int{3, 1, 2, 0} {
		require.NoError(t, sink.Put(t.Context(), testRecord(i)))
	}
	ok, err := sink.MarkRedriven(t.Context(), testRecord(2).ID)
	require.NoError(t, err)
	require.True(t, ok)
	appendRaw(t, path, "garbage\n")
	for _, f := range []deadletter.Filter{{}, {State: deadletter.Pending}, {State: deadletter.Redriven}, {Limit: 2}, {State: deadletter.Pending, Limit: 2}} {
		want, wantErr := sink.List(t.Context(), f)
		var got []retry.DeadLetter
		err := deadletter.ScanFile(path, f, func(dl retry.DeadLetter) error { got = append(got, dl); return nil })
		assert.Equal(t, wantErr, err, "%+v", f)
		assert.Equal(t, want, got, "%+v", f)
	}
	stop := errors.New("stop")
	calls := 0
	err = deadletter.ScanFile(path, deadletter.Filter{}, func(retry.DeadLetter) error { calls++; return stop })
	assert.Equal(t, stop, err)
	assert.Equal(t, 1, calls)
	err = deadletter.ScanFile(path, deadletter.Filter{Limit: -1}, func(retry.DeadLetter) error { return nil })
	assert.ErrorIs(t, err, retry.ErrInvalidOption)
	err = deadletter.ScanFile(filepath.Join(t.TempDir(), "none"), deadletter.Filter{}, func(retry.DeadLetter) error { return nil })
	assert.ErrorIs(t, err, os.ErrNotExist)
}
