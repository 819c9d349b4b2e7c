package deadletter_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/memstore"
)

// TestRedrive_keylessRecordWithTunedIdempotency: a keyless record is
// replayed without the store even when the Retrier tunes idempotency, and
// that is not mistaken for tuning options without a store.
func TestRedrive_keylessRecordWithTunedIdempotency(t *testing.T) {
	store := memstore.New(nil)
	src := deadletter.NewMemorySink()
	dl := testRecord(0)
	dl.IdempotencyKey = ""
	require.NoError(t, src.Put(t.Context(), dl))
	var c replayCounter
	r := redriver(t, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "shared", Lease: time.Minute}))
	rep, err := deadletter.Redrive(t.Context(), src, r, c.handler(nil), nil)
	require.NoError(t, err)
	assert.Equal(t, deadletter.Report{Pending: 1, Succeeded: 1}, rep)
	assert.Zero(t, store.Len())
}
