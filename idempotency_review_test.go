package retry_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrystats"
)

// panicJSON's MarshalJSON dereferences a nil pointer: the default codec
// panics after fn succeeded.
type panicJSON struct{ p *int }

func (b panicJSON) MarshalJSON() ([]byte, error) { return json.Marshal(*b.p) }

// A panic in the value's encoding comes after fn succeeded: the key must
// not be freed (the next call would repeat the work), and the observer
// must still hear the attempt and the call end.
func TestIdempotentEncodingPanicDoesNotFreeTheKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts retry.IdempotencyOptions
		fn   func(context.Context) (any, error)
	}{
		{"custom Marshal", retry.IdempotencyOptions{Key: "k",
			Marshal:   func(any) ([]byte, error) { panic("marshal boom") },
			Unmarshal: func([]byte, any) error { return nil }},
			func(context.Context) (any, error) { return 1, nil }},
		{"MarshalJSON", retry.IdempotencyOptions{Key: "k"},
			func(context.Context) (any, error) { return panicJSON{}, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newFaulty()
			stats := &retrystats.Stats{}
			r := mustNew(t, retry.WithIdempotency(store, &tc.opts), retry.WithObserver(stats))
			calls := 0
			fn := func(ctx context.Context) (any, error) { calls++; return tc.fn(ctx) }
			func() {
				defer func() { assert.NotNil(t, recover(), "the panic goes on") }()
				_, _ = retry.DoValueOn(context.Background(), r, fn)
			}()
			s := stats.Snapshot()
			assert.Zero(t, s.InFlight, "the observer heard the call end")
			assert.Equal(t, uint64(1), s.Permanent)
			assert.False(t, claimFree(t, store, "k"), "the key is not freed")

			_, err := retry.DoValueOn(context.Background(), mustNew(t, retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k"})), fn)
			require.Error(t, err)
			assert.ErrorIs(t, err, retry.ErrReplayed, "the key is completed as a permanent failure")
			assert.Contains(t, err.Error(), "could not be encoded")
			assert.Equal(t, 1, calls, "fn ran once")
		})
	}
}
