package deadletter_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

// TestRedriveOfAFileHoldsOneRecordAtATime: Redrive of a FileSink takes
// each record from the file as it comes to it, so a large file is replayed
// in little memory (issue #20): the filter sees the next record only after
// the previous one was replayed, not every record first.
func TestRedriveOfAFileHoldsOneRecordAtATime(t *testing.T) {
	t.Parallel()
	src, _ := openFileSink(t, nil)
	putRecords(t, src, 3)
	var events []string
	filter := func(dl retry.DeadLetter) bool {
		events = append(events, "filter "+dl.ID[28:])
		return true
	}
	handler := func(_ context.Context, dl retry.DeadLetter) error {
		events = append(events, "replay "+dl.ID[28:])
		return nil
	}
	rep, err := deadletter.Redrive(t.Context(), src, redriver(t), handler, filter)
	require.NoError(t, err)
	assert.Equal(t, deadletter.Report{Pending: 3, Succeeded: 3}, rep)
	assert.Equal(t, []string{"filter 0001", "replay 0001", "filter 0002", "replay 0002", "filter 0003", "replay 0003"}, events)
}

// scanOnly is a Source whose records come from ScanPending alone: its
// Pending fails.
type scanOnly struct {
	*deadletter.MemorySink
	scans int
}

var errPendingCalled = errors.New("Pending called: Redrive should have used ScanPending")

func (s *scanOnly) Pending(context.Context) ([]retry.DeadLetter, error) {
	return nil, errPendingCalled
}

func (s *scanOnly) ScanPending(ctx context.Context, fn func(retry.DeadLetter) error) error {
	s.scans++
	pending, err := s.MemorySink.Pending(ctx)
	if err != nil {
		return err
	}
	for _, dl := range pending {
		if err := fn(dl); err != nil {
			return err
		}
	}
	return nil
}

// TestRedriveUsesScanPending: a source that has ScanPending is scanned,
// with the filter applied and the records replayed in its order.
func TestRedriveUsesScanPending(t *testing.T) {
	t.Parallel()
	src := &scanOnly{MemorySink: deadletter.NewMemorySink()}
	putRecords(t, src, 4)
	var c replayCounter
	skip := testRecord(1).ID
	rep, err := deadletter.Redrive(t.Context(), src, redriver(t), c.handler(nil), func(dl retry.DeadLetter) bool { return dl.ID != skip })
	require.NoError(t, err)
	assert.Equal(t, deadletter.Report{Pending: 3, Succeeded: 3}, rep)
	assert.Equal(t, 1, src.scans)
	assert.Equal(t, map[string]int{testRecord(0).ID: 1, testRecord(2).ID: 1, testRecord(3).ID: 1}, c.snapshot())
}

// TestRedriveScanStoppedEarlyCountsEveryRecord: a scanned Redrive that
// stops early, on a cancelled context or a failed mark, reports what a
// Redrive of Pending's slice does: every pending record the filter accepts
// in Report.Pending, the rest untouched.
func TestRedriveScanStoppedEarlyCountsEveryRecord(t *testing.T) {
	t.Parallel()
	t.Run("canceled", func(t *testing.T) {
		t.Parallel()
		src, _ := openFileSink(t, nil)
		putRecords(t, src, 4)
		ctx, cancel := context.WithCancel(t.Context())
		var c replayCounter
		handler := func(ctx context.Context, dl retry.DeadLetter) error {
			cancel()
			return c.handler(errDead)(ctx, dl)
		}
		filtered := 0
		filter := func(dl retry.DeadLetter) bool { filtered++; return dl.ID != testRecord(2).ID }
		rep, err := deadletter.Redrive(ctx, src, redriver(t), handler, filter)
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, deadletter.Report{Pending: 3, Failed: 1}, rep)
		assert.Equal(t, 4, filtered, "the filter is called once a record")
		assert.Equal(t, map[string]int{testRecord(0).ID: 1}, c.snapshot())
		pending, err := src.Pending(t.Context())
		require.NoError(t, err)
		require.Len(t, pending, 4, "three untouched records and the interrupted replay")
		assert.Equal(t, testRecord(0).ID, pending[3].RedriveOf)
	})
	t.Run("mark_fails", func(t *testing.T) {
		t.Parallel()
		errMark := errors.New("mark failed")
		src := &failMark{scanOnly: &scanOnly{MemorySink: deadletter.NewMemorySink()}, failAt: 2, err: errMark}
		putRecords(t, src, 4)
		var c replayCounter
		rep, err := deadletter.Redrive(t.Context(), src, redriver(t), c.handler(nil), nil)
		require.ErrorIs(t, err, errMark)
		assert.ErrorContains(t, err, "deadletter: redrive: marking "+testRecord(1).ID)
		assert.Equal(t, deadletter.Report{Pending: 4, Succeeded: 1}, rep)
		assert.Equal(t, map[string]int{testRecord(0).ID: 1}, c.snapshot())
	})
}

// failMark fails its failAt-th MarkRedriven.
type failMark struct {
	*scanOnly
	marks, failAt int
	err           error
}

func (s *failMark) MarkRedriven(ctx context.Context, id string) (bool, error) {
	if s.marks++; s.marks == s.failAt {
		return false, s.err
	}
	return s.scanOnly.MarkRedriven(ctx, id)
}

// TestRedriveScanErrorIsAListingError: a scan that fails partway stops
// Redrive with the scan's error, named as listing, after the records it
// passed.
func TestRedriveScanErrorIsAListingError(t *testing.T) {
	t.Parallel()
	errRead := errors.New("disk gone")
	src := &scanFails{scanOnly: &scanOnly{MemorySink: deadletter.NewMemorySink()}, err: errRead}
	putRecords(t, src, 2)
	var c replayCounter
	rep, err := deadletter.Redrive(t.Context(), src, redriver(t), c.handler(nil), nil)
	require.ErrorIs(t, err, errRead)
	assert.ErrorContains(t, err, "deadletter: redrive: listing dead letters: ")
	assert.Equal(t, deadletter.Report{Pending: 2, Succeeded: 2}, rep)
}

// scanFails passes its pending records and then fails.
type scanFails struct {
	*scanOnly
	err error
}

func (s *scanFails) ScanPending(ctx context.Context, fn func(retry.DeadLetter) error) error {
	if err := s.scanOnly.ScanPending(ctx, fn); err != nil {
		return err
	}
	return s.err
}
