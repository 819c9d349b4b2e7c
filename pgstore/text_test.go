package pgstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCompleteUnstorableErrorText stores permanent failures whose message
// a text column cannot hold: the bytes become U+FFFD instead of Complete
// failing with SQLSTATE 22021, which lost the outcome.
func TestCompleteUnstorableErrorText(t *testing.T) {
	store, _, _ := newStore(t, nil)
	ctx := context.Background()
	for msg, want := range map[string]string{
		"bad\x00byte":          "bad\uFFFDbyte",
		"secret-\xff\xfe-tail": "secret-\uFFFD-tail",
		"ok ✓":                 "ok ✓",
	} {
		c, err := store.Claim(ctx, msg, "fp", time.Minute)
		require.NoError(t, err)
		require.NoError(t, store.Complete(ctx, msg, c.Token, idempotency.StoredOutcome{Permanent: true, Error: msg}, time.Hour), "%q", msg)
		got, err := store.Claim(ctx, msg, "fp", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, idempotency.Claim{Status: idempotency.ClaimCompleted, Fingerprint: "fp",
			Outcome: idempotency.StoredOutcome{Permanent: true, Error: want}}, got, "%q", msg)
	}
}

// TestDoUnstorableErrorText runs a permanent failure with such a message
// through retry.Do twice: the outcome is recorded, so fn runs once and the
// second call replays it. Before, Complete failed on every try for the
// whole lease and the second call ran fn again.
func TestDoUnstorableErrorText(t *testing.T) {
	store, _, _ := newStore(t, nil)
	r, err := retry.New(retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "order-1", Lease: 100 * time.Millisecond}))
	require.NoError(t, err)
	var runs atomic.Int32
	fn := func(context.Context) error {
		runs.Add(1)
		return retry.Permanent(errors.New("upstream said: \xff\xfe\x00 no"))
	}
	require.Error(t, r.Do(context.Background(), fn))
	second := r.Do(context.Background(), fn)
	require.ErrorIs(t, second, retry.ErrReplayed)
	assert.Contains(t, second.Error(), "upstream said: \uFFFD\uFFFD no")
	assert.Equal(t, int32(1), runs.Load(), "fn runs once")
}
