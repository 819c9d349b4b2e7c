package retry_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
)

// TestNew_rejectsNilFuncsAndTypedNilsWithoutCallingFn covers every
// exported value that Do would call through: a nil func adapter or a nil
// pointer inside an interface is as nil as a nil interface, and must be
// refused up front rather than panic at the first retry.
func TestNew_rejectsNilFuncsAndTypedNilsWithoutCallingFn(t *testing.T) {
	store := retry.NewMemoryIdempotencyStore()
	cases := []struct {
		name    string
		opts    []retry.Option
		redrive retry.RedriveSource // set: the case is a Redrive source, not options
		want    string
	}{
		{name: "nil_backoff_func", opts: []retry.Option{retry.WithBackoff(retry.BackoffFunc(nil))},
			want: "WithBackoff((retry.BackoffFunc)(nil)): the backoff must not be nil"},
		{name: "nil_dead_letter_func", opts: []retry.Option{retry.WithDeadLetter(retry.DeadLetterFunc(nil))},
			want: "WithDeadLetter((retry.DeadLetterFunc)(nil)): the sink must not be nil"},
		{name: "nil_dead_letter_pointer", opts: []retry.Option{retry.WithDeadLetter((*retry.FileSink)(nil))},
			want: "WithDeadLetter((*retry.FileSink)(nil))"},
		{name: "nil_fallback_func", opts: []retry.Option{retry.WithDeadLetter(retry.NewMemoryDeadLetterSink()), retry.WithDeadLetterFallback(retry.DeadLetterFunc(nil))},
			want: "WithDeadLetterFallback((retry.DeadLetterFunc)(nil)): the sink must not be nil"},
		{name: "nil_observer_pointer", opts: []retry.Option{retry.WithObserver((*retry.Stats)(nil))},
			want: "WithObserver((*retry.Stats)(nil)): the observer must not be nil"},
		{name: "nil_clock_pointer", opts: []retry.Option{retry.WithClock((*clock.Mock)(nil))},
			want: "WithClock((*clock.Mock)(nil)): the clock must not be nil"},
		{name: "nil_random_pointer", opts: []retry.Option{retry.WithRandom((*rand.PCG)(nil))},
			want: "WithRandom((*rand.PCG)(nil)): the source must not be nil"},
		{name: "nil_store_pointer", opts: []retry.Option{retry.WithIdempotency((*retry.MemoryIdempotencyStore)(nil), "order-4711")},
			want: "WithIdempotency((*retry.MemoryIdempotencyStore)(nil), key): the store must not be nil"},
		{name: "nil_codec_pointer", opts: []retry.Option{retry.WithIdempotency(store, "k"), retry.WithIdempotencyCodec((*retry.JSONCodec)(nil))},
			want: "WithIdempotencyCodec((*retry.JSONCodec)(nil)): the codec must not be nil"},
		{name: "nil_redrive_source_pointer", redrive: (*retry.MemoryDeadLetterSink)(nil),
			want: "Redrive: the source is nil"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			if tc.redrive != nil {
				_, err := retry.Redrive(t.Context(), tc.redrive, mustNew(t), func(context.Context, retry.DeadLetter) error { calls++; return nil }, nil)
				require.ErrorIs(t, err, retry.ErrInvalidOption)
				assert.ErrorContains(t, err, tc.want)
				assert.Zero(t, calls, "the handler must not be called")
				return
			}
			r, err := retry.New(tc.opts...)
			assert.Nil(t, r)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.ErrorContains(t, err, tc.want)
			assert.NotContains(t, err.Error(), "order-4711", "keys stay out of error text")

			fn := func(context.Context) error { calls++; return errTransient }
			err = retry.Do(t.Context(), fn, tc.opts...)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.ErrorContains(t, err, tc.want)
			_, err = retry.DoValue(t.Context(), func(context.Context) (int, error) { calls++; return 0, errTransient }, tc.opts...)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			with, err := mustNew(t).With(tc.opts...)
			assert.Nil(t, with)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.Zero(t, calls, "fn must not be called")
		})
	}
}
