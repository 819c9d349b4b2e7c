package deadletter_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/memstore"
)

// replayCounter counts the handler's calls per record ID.
type replayCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *replayCounter) handler(err error) func(context.Context, retry.DeadLetter) error {
	return func(_ context.Context, dl retry.DeadLetter) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.calls == nil {
			c.calls = make(map[string]int)
		}
		c.calls[dl.ID]++
		return err
	}
}

func (c *replayCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

func putRecords(t *testing.T, sink retry.DeadLetterSink, n int) {
	t.Helper()
	for i := range n {
		require.NoError(t, sink.Put(t.Context(), testRecord(i)))
	}
}

func redriver(t *testing.T, opts ...retry.Option) *retry.Retrier {
	t.Helper()
	r, err := retry.New(append([]retry.Option{retry.WithBackoff(retry.Constant(0))}, opts...)...)
	require.NoError(t, err)
	return r
}

func TestRedriveReplaysEachRecordOnce(t *testing.T) {
	t.Parallel()
	sources := map[string]func(t *testing.T) deadletter.Source{
		"memory": func(*testing.T) deadletter.Source { return deadletter.NewMemorySink() },
		"file":   func(t *testing.T) deadletter.Source { s, _ := openFileSink(t, nil); return s },
	}
	for name, newSource := range sources {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src := newSource(t)
			putRecords(t, src, 5)
			var c replayCounter
			var seen []retry.DeadLetter
			var mu sync.Mutex
			handler := func(ctx context.Context, dl retry.DeadLetter) error {
				mu.Lock()
				seen = append(seen, dl)
				mu.Unlock()
				return c.handler(nil)(ctx, dl)
			}
			rep, err := deadletter.Redrive(t.Context(), src, redriver(t), handler, nil)
			require.NoError(t, err)
			assert.Equal(t, deadletter.Report{Pending: 5, Succeeded: 5}, rep)
			require.Len(t, seen, 5)
			for i, dl := range seen {
				assert.Equal(t, testRecord(i), dl, "the handler gets the whole record, key and payload included")
			}

			rep, err = deadletter.Redrive(t.Context(), src, redriver(t), c.handler(nil), nil)
			require.NoError(t, err)
			assert.Equal(t, deadletter.Report{}, rep)
			for i := range 5 {
				assert.Equal(t, 1, c.snapshot()[testRecord(i).ID])
			}
			pending, err := src.Pending(t.Context())
			require.NoError(t, err)
			assert.Empty(t, pending)
		})
	}
}

// TestRedriveConcurrent: several redrives of one file at once still
// replay every record exactly once.
func TestRedriveConcurrent(t *testing.T) {
	t.Parallel()
	src, path := openFileSink(t, nil)
	const n, redrives = 60, 4
	putRecords(t, src, n)
	var c replayCounter
	reports := make([]deadletter.Report, redrives)
	var wg sync.WaitGroup
	for i := range redrives {
		wg.Go(func() {
			var err error
			reports[i], err = deadletter.Redrive(t.Context(), src, redriver(t), c.handler(nil), nil)
			assert.NoError(t, err)
		})
	}
	wg.Wait()

	calls := c.snapshot()
	assert.Len(t, calls, n)
	for id, k := range calls {
		assert.Equal(t, 1, k, "record %s replayed %d times", id, k)
	}
	var succeeded, skipped int
	for _, rep := range reports {
		succeeded += rep.Succeeded
		skipped += rep.Skipped
		assert.Equal(t, rep.Pending, rep.Succeeded+rep.Skipped)
	}
	assert.Equal(t, n, succeeded)
	recs, err := deadletter.ReadFile(path)
	require.NoError(t, err)
	for _, dl := range recs {
		assert.False(t, dl.Redriven.IsZero(), "record %s not marked", dl.ID)
	}
}

// TestRedriveFailureIsDeadLetteredAgain: a replay that fails again
// becomes a new record pointing at the old one, and is itself replayed by
// the next redrive, never the old one.
func TestRedriveFailureIsDeadLetteredAgain(t *testing.T) {
	t.Parallel()
	src, _ := openFileSink(t, nil)
	putRecords(t, src, 1)
	old := testRecord(0)
	var c replayCounter
	errStill := errors.New("still down")

	rep, err := deadletter.Redrive(t.Context(), src, redriver(t, retry.WithMaxAttempts(2)), c.handler(errStill), nil)
	require.NoError(t, err)
	assert.Equal(t, deadletter.Report{Pending: 1, Failed: 1}, rep)
	assert.Equal(t, 2, c.snapshot()[old.ID], "two attempts")

	pending, err := src.Pending(t.Context())
	require.NoError(t, err)
	require.Len(t, pending, 1)
	again := pending[0]
	assert.NotEqual(t, old.ID, again.ID)
	assert.Equal(t, 1, again.Redrives)
	assert.Equal(t, old.ID, again.RedriveOf)
	assert.Equal(t, old.Name, again.Name)
	assert.Equal(t, old.Payload, again.Payload)
	assert.Equal(t, old.IdempotencyKey, again.IdempotencyKey)
	assert.Equal(t, retry.OutcomeExhausted, again.Reason)
	assert.Equal(t, "still down", again.LastError)

	rep, err = deadletter.Redrive(t.Context(), src, redriver(t, retry.WithMaxAttempts(1)), c.handler(retry.Permanent(errStill)), nil)
	require.NoError(t, err)
	assert.Equal(t, deadletter.Report{Pending: 1, Failed: 1}, rep)
	pending, err = src.Pending(t.Context())
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, 2, pending[0].Redrives)
	assert.Equal(t, again.ID, pending[0].RedriveOf)
	assert.Equal(t, retry.OutcomePermanent, pending[0].Reason)
}

// TestRedriveUsesTheRetriersSink: with a sink of its own, r records the
// replays that fail again; the source only gets its marker.
func TestRedriveUsesTheRetriersSink(t *testing.T) {
	t.Parallel()
	src := deadletter.NewMemorySink()
	putRecords(t, src, 1)
	other := deadletter.NewMemorySink()
	var c replayCounter
	rep, err := deadletter.Redrive(t.Context(), src, redriver(t, retry.WithDeadLetter(other, nil), retry.WithMaxAttempts(1)), c.handler(errDead), nil)
	require.NoError(t, err)
	assert.Equal(t, deadletter.Report{Pending: 1, Failed: 1}, rep)
	assert.Equal(t, 1, src.Len())
	require.Equal(t, 1, other.Len())
	assert.Equal(t, testRecord(0).ID, other.Records()[0].RedriveOf)
}

// TestRedriveCanceledIsKept: a redrive cut short by its context
// dead-letters the replay it interrupted and stops.
func TestRedriveCanceledIsKept(t *testing.T) {
	t.Parallel()
	src := deadletter.NewMemorySink()
	putRecords(t, src, 3)
	ctx, cancel := context.WithCancel(t.Context())
	var c replayCounter
	handler := func(ctx context.Context, dl retry.DeadLetter) error {
		cancel()
		return c.handler(errDead)(ctx, dl)
	}
	rep, err := deadletter.Redrive(ctx, src, redriver(t), handler, nil)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, deadletter.Report{Pending: 3, Failed: 1}, rep)
	pending, err := src.Pending(t.Context())
	require.NoError(t, err)
	require.Len(t, pending, 3, "two untouched records and the interrupted replay")
	assert.Equal(t, retry.OutcomeUnknown, pending[2].Reason, "the handler was running when the context ended")
	assert.Equal(t, testRecord(0).ID, pending[2].RedriveOf)
}

func TestRedriveNotRecorded(t *testing.T) {
	t.Parallel()
	src := deadletter.NewMemorySink()
	putRecords(t, src, 2)
	errSink := errors.New("sink down")
	r := redriver(t, retry.WithMaxAttempts(1), retry.WithDeadLetter(deadletter.Func(func(context.Context, retry.DeadLetter) error { return errSink }), nil))
	var c replayCounter
	rep, err := deadletter.Redrive(t.Context(), src, r, c.handler(errDead), nil)
	assert.ErrorIs(t, err, retry.ErrDeadLetterNotRecorded)
	assert.ErrorIs(t, err, errSink)
	assert.ErrorIs(t, err, errDead)
	assert.Contains(t, err.Error(), testRecord(0).ID)
	assert.Equal(t, deadletter.Report{Pending: 2, NotRecorded: 2}, rep)
}

func TestRedriveFilter(t *testing.T) {
	t.Parallel()
	src := deadletter.NewMemorySink()
	putRecords(t, src, 4)
	var c replayCounter
	only := testRecord(2).ID
	rep, err := deadletter.Redrive(t.Context(), src, redriver(t), c.handler(nil), func(dl retry.DeadLetter) bool { return dl.ID == only })
	require.NoError(t, err)
	assert.Equal(t, deadletter.Report{Pending: 1, Succeeded: 1}, rep)
	assert.Equal(t, map[string]int{only: 1}, c.snapshot())
	pending, err := src.Pending(t.Context())
	require.NoError(t, err)
	assert.Len(t, pending, 3)
}

// TestRedriveIdempotentHandler: the replay carries the idempotency key, so
// a handler that checks it does nothing for work that meanwhile
// succeeded.
func TestRedriveIdempotentHandler(t *testing.T) {
	t.Parallel()
	src := deadletter.NewMemorySink()
	putRecords(t, src, 3)
	done := map[string]bool{testRecord(1).IdempotencyKey: true} // succeeded after it was dead-lettered
	var effects []string
	handler := func(_ context.Context, dl retry.DeadLetter) error {
		if done[dl.IdempotencyKey] {
			return nil
		}
		done[dl.IdempotencyKey] = true
		effects = append(effects, dl.IdempotencyKey)
		return nil
	}
	rep, err := deadletter.Redrive(t.Context(), src, redriver(t), handler, nil)
	require.NoError(t, err)
	assert.Equal(t, 3, rep.Succeeded)
	assert.Equal(t, []string{"key-0", "key-2"}, effects)
}

func TestRedriveBadArguments(t *testing.T) {
	t.Parallel()
	src := deadletter.NewMemorySink()
	r := redriver(t)
	h := func(context.Context, retry.DeadLetter) error { return nil }
	cases := []struct {
		name string
		ctx  context.Context
		src  deadletter.Source
		r    *retry.Retrier
		h    func(context.Context, retry.DeadLetter) error
	}{
		{"nil_ctx", nil, src, r, h},
		{"nil_source", t.Context(), nil, r, h},
		{"nil_source_pointer", t.Context(), (*deadletter.MemorySink)(nil), r, h},
		{"nil_handler", t.Context(), src, r, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := deadletter.Redrive(tc.ctx, tc.src, tc.r, tc.h, nil)
			assert.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.ErrorContains(t, err, "Redrive: the ")
		})
	}
	// A nil Retrier is the zero Retrier, as everywhere one is taken.
	_, err := deadletter.Redrive(t.Context(), src, nil, h, nil)
	assert.NoError(t, err)
}

// TestRedriveWithIdempotencyStore: dead letters keep the call's
// idempotency key, and a replay under it does nothing for work that
// succeeded after it was dead-lettered.
func TestRedriveWithIdempotencyStore(t *testing.T) {
	t.Parallel()
	store := memstore.New(nil)
	sink := deadletter.NewMemorySink()
	r := redriver(t, retry.WithIdempotency(store, nil), retry.WithDeadLetter(sink, nil), retry.WithMaxAttempts(2))
	ctxFor := func(key string) context.Context { return retry.ContextWithIdempotencyKey(t.Context(), key) }
	for _, key := range []string{"order-1", "order-2"} {
		err := r.Do(ctxFor(key), func(context.Context) error { return errDead })
		require.ErrorIs(t, err, retry.ErrExhausted)
	}
	recs := sink.Records()
	require.Len(t, recs, 2)
	assert.Equal(t, "order-1", recs[0].IdempotencyKey)
	assert.Equal(t, "order-2", recs[1].IdempotencyKey)

	// order-1 succeeds meanwhile, through another path.
	require.NoError(t, r.Do(ctxFor("order-1"), func(context.Context) error { return nil }))

	var c replayCounter
	rep, err := deadletter.Redrive(t.Context(), sink, r, c.handler(nil), nil)
	require.NoError(t, err)
	assert.Equal(t, deadletter.Report{Pending: 2, Succeeded: 2}, rep)
	assert.Equal(t, map[string]int{recs[1].ID: 1}, c.snapshot(), "order-1 was not run again")

	// Now order-2 is complete too: a replay of it would be a no-op.
	called := false
	require.NoError(t, r.Do(ctxFor("order-2"), func(context.Context) error { called = true; return nil }))
	assert.False(t, called)
}

// TestRedriveKeylessRecordSkipsTheStore: a record without a key is not
// replayed under the Retrier's default key.
func TestRedriveKeylessRecordSkipsTheStore(t *testing.T) {
	t.Parallel()
	store := memstore.New(nil)
	src := deadletter.NewMemorySink()
	for i := range 2 {
		dl := testRecord(i)
		dl.IdempotencyKey = ""
		require.NoError(t, src.Put(t.Context(), dl))
	}
	var c replayCounter
	rep, err := deadletter.Redrive(t.Context(), src, redriver(t, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "shared"})), c.handler(nil), nil)
	require.NoError(t, err)
	assert.Equal(t, deadletter.Report{Pending: 2, Succeeded: 2}, rep)
	assert.Len(t, c.snapshot(), 2, "both ran: no shared key")
	assert.Zero(t, store.Len())
}
