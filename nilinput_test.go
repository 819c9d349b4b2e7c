package retry_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/retrystats"
)

// TestNew_rejectsNilFuncsAndTypedNilsWithoutCallingFn covers every
// exported value that Do would call through: a nil func adapter or a nil
// pointer inside an interface is as nil as a nil interface, and must be
// refused up front rather than panic at the first retry.
func TestNew_rejectsNilFuncsAndTypedNilsWithoutCallingFn(t *testing.T) {
	store := memstore.New(nil)
	cases := []struct {
		name string
		opts []retry.Option
		want string
	}{
		{name: "nil_backoff_func", opts: []retry.Option{retry.WithBackoff(retry.BackoffFunc(nil))},
			want: "WithBackoff((retry.BackoffFunc)(nil)): the backoff must not be nil"},
		{name: "nil_dead_letter_func", opts: []retry.Option{retry.WithDeadLetter(deadletter.Func(nil), nil)},
			want: "WithDeadLetter((deadletter.Func)(nil), opts): the sink must not be nil"},
		{name: "nil_dead_letter_pointer", opts: []retry.Option{retry.WithDeadLetter((*deadletter.FileSink)(nil), nil)},
			want: "WithDeadLetter((*deadletter.FileSink)(nil), opts)"},
		{name: "nil_fallback_func", opts: []retry.Option{retry.WithDeadLetter(deadletter.NewMemorySink(), &retry.DeadLetterOptions{Fallback: deadletter.Func(nil)})},
			want: "DeadLetterOptions.Fallback is (deadletter.Func)(nil)"},
		{name: "nil_observer_pointer", opts: []retry.Option{retry.WithObserver((*retrystats.Stats)(nil))},
			want: "WithObserver((*retrystats.Stats)(nil)): the observer must not be nil"},
		{name: "nil_clock_pointer", opts: []retry.Option{retry.WithClock((*clock.Mock)(nil))},
			want: "WithClock((*clock.Mock)(nil)): the clock must not be nil"},
		{name: "nil_random_pointer", opts: []retry.Option{retry.WithRandom((*rand.PCG)(nil))},
			want: "WithRandom((*rand.PCG)(nil)): the source must not be nil"},
		{name: "nil_store_pointer", opts: []retry.Option{retry.WithIdempotency((*memstore.Store)(nil), &retry.IdempotencyOptions{Key: "order-4711"})},
			want: "WithIdempotency((*memstore.Store)(nil), opts): the store must not be nil"},
		{name: "marshal_without_unmarshal", opts: []retry.Option{retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "k", Marshal: json.Marshal})},
			want: "set both IdempotencyOptions.Marshal and Unmarshal, or neither"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
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
