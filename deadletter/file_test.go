package deadletter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

func openFileSink(t testing.TB, opts *deadletter.FileOptions) (*deadletter.FileSink, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "deadletters.jsonl")
	sink, err := deadletter.OpenFile(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	return sink, path
}

func testRecord(i int) retry.DeadLetter {
	at := time.Date(2026, 11, 29, 8, 0, i, 0, time.UTC)
	return retry.DeadLetter{
		ID:             fmt.Sprintf("%032x", i+1),
		Name:           "charge",
		IdempotencyKey: fmt.Sprintf("key-%d", i),
		Payload:        []byte(fmt.Sprintf(`{"order":%d}`, i)),
		Attempts:       3,
		FirstAttempt:   at,
		GaveUp:         at.Add(2 * time.Second),
		Reason:         retry.OutcomeExhausted,
		LastError:      "connection refused",
		Errors: []retry.AttemptError{
			{Attempt: 1, Error: "connection refused"},
			{Attempt: 2, Wait: time.Second, Error: "connection refused"},
		},
	}
}

func TestFileSinkRoundTrip(t *testing.T) {
	t.Parallel()
	sink, path := openFileSink(t, nil)
	want := []retry.DeadLetter{testRecord(0), testRecord(1)}
	want[1].Payload = bytes.Repeat([]byte("x"), 200<<10) // longer than a bufio.Scanner line
	want[1].Redrives, want[1].RedriveOf = 1, want[0].ID
	for _, dl := range want {
		require.NoError(t, sink.Put(t.Context(), dl))
	}
	got, err := deadletter.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, 2, bytes.Count(data, []byte("\n")), "one record a line")
	assert.Contains(t, string(data), `"reason":"exhausted"`)
}

// TestFileSinkWithDo: the file sink as Do's sink, end to end.
func TestFileSinkWithDo(t *testing.T) {
	t.Parallel()
	sink, path := openFileSink(t, nil)
	err := retry.Do(t.Context(), func(context.Context) error { return errDead },
		retry.WithDeadLetter(sink, nil), retry.WithBackoff(retry.Constant(0)), retry.WithName("charge"), retry.WithPayload([]byte("p")))
	require.ErrorIs(t, err, retry.ErrExhausted)
	require.NotErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
	got, err := deadletter.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "charge", got[0].Name)
	assert.Equal(t, []byte("p"), got[0].Payload)
	assert.Equal(t, 3, got[0].Attempts)
	assert.Len(t, got[0].Errors, 3)
}

// TestFileSinkConcurrentWriters is not parallel, so that its leak check
// sees only its own goroutines.
func TestFileSinkConcurrentWriters(t *testing.T) {
	for _, syncEach := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync_each_%v", syncEach), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			sink, path := openFileSink(t, &deadletter.FileOptions{SyncEach: syncEach})
			const writers, each = 16, 25
			var wg sync.WaitGroup
			errs := make(chan error, writers*each)
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						errs <- sink.Put(t.Context(), testRecord(w*each+i))
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			got, err := deadletter.ReadFile(path)
			require.NoError(t, err, "no torn line")
			require.Len(t, got, writers*each)
			seen := make(map[string]bool)
			for _, dl := range got {
				seen[dl.ID] = true
			}
			for i := range writers * each {
				assert.True(t, seen[testRecord(i).ID], "record %d missing", i)
			}
		})
	}
}

// TestFileSinkTwoSinksOneFile: two sinks on one file, as two processes
// would have, interleave whole lines only.
func TestFileSinkTwoSinksOneFile(t *testing.T) {
	t.Parallel()
	a, path := openFileSink(t, nil)
	b, err := deadletter.OpenFile(path, nil)
	require.NoError(t, err)
	defer b.Close()
	const each = 200
	var wg sync.WaitGroup
	for i, sink := range []*deadletter.FileSink{a, b} {
		for w := range 4 {
			wg.Go(func() {
				for j := range each / 4 {
					assert.NoError(t, sink.Put(t.Context(), testRecord(i*each+w*each/4+j)))
				}
			})
		}
	}
	wg.Wait()
	got, err := deadletter.ReadFile(path)
	require.NoError(t, err, "no torn line")
	assert.Len(t, got, 2*each)
}

// TestFileSinkTornLastLine simulates a crash in the middle of a write: the
// reader returns every whole record and reports the torn one, and a
// reopened sink appends after it without harm.
func TestFileSinkTornLastLine(t *testing.T) {
	t.Parallel()
	sink, path := openFileSink(t, nil)
	const n = 10
	for i := range n {
		require.NoError(t, sink.Put(t.Context(), testRecord(i)))
	}
	require.NoError(t, sink.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lastLine := int64(bytes.LastIndexByte(data[:len(data)-1], '\n') + 1)
	require.NoError(t, os.Truncate(path, lastLine+40)) // cut the last record mid-line

	got, err := deadletter.ReadFile(path)
	var torn *deadletter.TornRecordError
	require.ErrorAs(t, err, &torn)
	assert.Equal(t, []int64{lastLine}, torn.Offsets)
	assert.Equal(t, path, torn.Path)
	assert.Contains(t, err.Error(), fmt.Sprintf("1 torn record skipped, at byte offset %d", lastLine))
	want := make([]retry.DeadLetter, n-1)
	for i := range want {
		want[i] = testRecord(i)
	}
	assert.Equal(t, want, got)

	// After the restart, new records start on a line of their own.
	sink, err = deadletter.OpenFile(path, nil)
	require.NoError(t, err)
	defer sink.Close()
	require.NoError(t, sink.Put(t.Context(), testRecord(n)))
	got, err = deadletter.ReadFile(path)
	require.ErrorAs(t, err, &torn)
	assert.Equal(t, []int64{lastLine}, torn.Offsets)
	assert.Equal(t, append(want, testRecord(n)), got)
}

func TestReadFileSkipsBadLinesAndDuplicates(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "dl.jsonl")
	line := func(dl retry.DeadLetter) string {
		sink, p := openFileSink(t, nil)
		require.NoError(t, sink.Put(t.Context(), dl))
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		return string(data)
	}
	a, b := line(testRecord(0)), line(testRecord(1))
	content := a + "not json\n" + "\n" + "{}\n" + a + b
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	got, err := deadletter.ReadFile(path)
	var torn *deadletter.TornRecordError
	require.ErrorAs(t, err, &torn)
	assert.Equal(t, []int64{int64(len(a)), int64(len(a) + len("not json\n\n"))}, torn.Offsets)
	assert.Equal(t, []retry.DeadLetter{testRecord(0), testRecord(1)}, got)
}

func TestReadFileMissing(t *testing.T) {
	t.Parallel()
	got, err := deadletter.ReadFile(filepath.Join(t.TempDir(), "none.jsonl"))
	require.ErrorIs(t, err, os.ErrNotExist)
	var torn *deadletter.TornRecordError
	assert.False(t, errors.As(err, &torn))
	assert.Nil(t, got)
}

func TestFileSinkMarkRedriven(t *testing.T) {
	t.Parallel()
	sink, path := openFileSink(t, nil)
	for i := range 3 {
		require.NoError(t, sink.Put(t.Context(), testRecord(i)))
	}
	id := testRecord(1).ID
	ok, err := sink.MarkRedriven(t.Context(), id)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = sink.MarkRedriven(t.Context(), id)
	require.NoError(t, err)
	assert.False(t, ok, "marked twice")
	ok, err = sink.MarkRedriven(t.Context(), "unknown")
	require.NoError(t, err)
	assert.False(t, ok, "marked an unknown record")

	// A record put after the first mark can be marked too.
	require.NoError(t, sink.Put(t.Context(), testRecord(3)))
	ok, err = sink.MarkRedriven(t.Context(), testRecord(3).ID)
	require.NoError(t, err)
	assert.True(t, ok)

	pending, err := sink.Pending(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []retry.DeadLetter{testRecord(0), testRecord(2)}, pending)

	all, err := deadletter.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, all, 4)
	assert.False(t, all[1].Redriven.IsZero(), "the marker is folded into the record")
	assert.True(t, all[0].Redriven.IsZero())

	// A new sink on the same file knows the marks from the markers.
	require.NoError(t, sink.Close())
	sink2, err := deadletter.OpenFile(path, nil)
	require.NoError(t, err)
	defer sink2.Close()
	ok, err = sink2.MarkRedriven(t.Context(), id)
	require.NoError(t, err)
	assert.False(t, ok, "marked again after a restart")
	pending, err = sink2.Pending(t.Context())
	require.NoError(t, err)
	assert.Len(t, pending, 2)
}

func TestFileSinkClosed(t *testing.T) {
	t.Parallel()
	sink, _ := openFileSink(t, nil)
	require.NoError(t, sink.Put(t.Context(), testRecord(0)))
	require.NoError(t, sink.Close())
	require.NoError(t, sink.Close(), "Close is idempotent")
	assert.ErrorIs(t, sink.Put(t.Context(), testRecord(1)), os.ErrClosed)
	_, err := sink.MarkRedriven(t.Context(), testRecord(0).ID)
	assert.ErrorIs(t, err, os.ErrClosed)
}

func TestFileSinkRejectsRecordWithoutID(t *testing.T) {
	t.Parallel()
	sink, path := openFileSink(t, nil)
	err := sink.Put(t.Context(), retry.DeadLetter{Name: "charge"})
	require.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.Contains(t, err.Error(), "no ID")
	got, err := deadletter.ReadFile(path)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestFileSinkDoneContext(t *testing.T) {
	t.Parallel()
	sink, path := openFileSink(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	assert.ErrorIs(t, sink.Put(ctx, testRecord(0)), context.Canceled)
	got, err := deadletter.ReadFile(path)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestOpenFileBadPath(t *testing.T) {
	t.Parallel()
	_, err := deadletter.OpenFile(filepath.Join(t.TempDir(), "missing-dir", "dl.jsonl"), nil)
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.True(t, strings.HasPrefix(err.Error(), "deadletter: opening file"), err.Error())
}

// BenchmarkFileSinkPut compares an fsync per record with group commit,
// under 8 and 64 concurrent writers.
func BenchmarkFileSinkPut(b *testing.B) {
	for _, mode := range []struct {
		name     string
		syncEach bool
	}{{"sync_each", true}, {"group_commit", false}} {
		for _, writers := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/writers=%d", mode.name, writers), func(b *testing.B) {
				sink, _ := openFileSink(b, &deadletter.FileOptions{SyncEach: mode.syncEach})
				dl := testRecord(0)
				ctx := context.Background()
				work := make(chan struct{}, writers)
				var wg sync.WaitGroup
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for range writers {
					wg.Go(func() {
						for range work {
							if err := sink.Put(ctx, dl); err != nil {
								b.Error(err)
							}
						}
					})
				}
				for range b.N {
					work <- struct{}{}
				}
				close(work)
				wg.Wait()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
			})
		}
	}
}

// A record whose reason is not a failure outcome would read back as a
// torn line: Put refuses it, and the file stays readable.
func TestFileSink_refusesAReasonThatIsNotAFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dl.jsonl")
	sink, err := deadletter.OpenFile(path, nil)
	require.NoError(t, err)
	defer sink.Close()
	for _, reason := range []retry.Outcome{retry.OutcomeSuccess, retry.OutcomeUnknown + 1, 99} {
		err := sink.Put(t.Context(), retry.DeadLetter{ID: deadletter.NewID(), Name: "charge", Reason: reason})
		require.ErrorIs(t, err, retry.ErrInvalidOption, "reason %d", reason)
		assert.Contains(t, err.Error(), "not a failure outcome")
	}
	require.NoError(t, sink.Put(t.Context(), retry.DeadLetter{ID: deadletter.NewID(), Name: "charge", Reason: retry.OutcomeExhausted}))
	pending, err := sink.Pending(t.Context())
	require.NoError(t, err)
	assert.Len(t, pending, 1)
}
