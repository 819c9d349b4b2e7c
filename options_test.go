package retry_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/overload"
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

// TestZeroMeansNoLimit: 0 turns a time limit off, also after an earlier
// non-zero value, and a zero cap, which would remove every wait, is refused.
func TestZeroMeansNoLimit(t *testing.T) {
	t.Run("max_elapsed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			err := retry.Do(t.Context(), func(context.Context) error { return errTransient },
				retry.WithBackoff(retry.Constant(time.Hour)), retry.WithMaxElapsed(time.Minute), retry.WithMaxElapsed(0))
			var re *retry.Error
			require.ErrorAs(t, err, &re)
			assert.Equal(t, retry.OutcomeExhausted, re.Outcome, "no budget: the hour-long waits are taken")
			assert.Equal(t, 3, re.Attempts)
		})
	})
	t.Run("attempt_timeout", func(t *testing.T) {
		var deadlines []bool
		err := retry.Do(t.Context(), func(ctx context.Context) error {
			_, ok := ctx.Deadline()
			deadlines = append(deadlines, ok)
			return nil
		}, retry.WithAttemptTimeout(time.Second), retry.WithAttemptTimeout(0))
		require.NoError(t, err)
		assert.Equal(t, []bool{false}, deadlines, "no per-attempt deadline")
	})
	t.Run("max_delay_is_refused", func(t *testing.T) {
		calls := 0
		err := retry.Do(t.Context(), func(context.Context) error { calls++; return errTransient }, retry.WithMaxDelay(0))
		require.ErrorIs(t, err, retry.ErrInvalidOption)
		assert.ErrorContains(t, err, "WithMaxDelay(0)")
		assert.ErrorContains(t, err, "WithBackoff(Constant(0))", "the error says how to get no waits")
		assert.Zero(t, calls)
	})
}

// delaysOf runs a call that always fails and returns the waits Do chose.
func delaysOf(t *testing.T, fail func() error, opts ...retry.Option) []time.Duration {
	t.Helper()
	rec := &recorder{}
	synctest.Test(t, func(t *testing.T) {
		err := retry.Do(t.Context(), func(context.Context) error { return fail() },
			append([]retry.Option{retry.WithJitter(retry.NoJitter), retry.WithObserver(rec)}, opts...)...)
		require.ErrorIs(t, err, retry.ErrExhausted)
	})
	return rec.delays()
}

func TestDo_explicitBackoffIsNotCappedByTheDefaultMaxDelay(t *testing.T) {
	transient := func() error { return errTransient }
	assert.Equal(t, []time.Duration{2 * time.Minute, 2 * time.Minute},
		delaysOf(t, transient, retry.WithBackoff(retry.Constant(2*time.Minute))),
		"Constant(2m) waits 2m, not DefaultMaxDelay")
	assert.Equal(t, []time.Duration{time.Second, 10 * time.Second, 100 * time.Second, 1000 * time.Second, 10000 * time.Second, 24 * time.Hour},
		delaysOf(t, transient, retry.WithBackoff(retry.Exponential(time.Second, 10, 24*time.Hour)), retry.WithMaxAttempts(7)),
		"Exponential(1s, 10, 24h) grows up to its own max")
	assert.Equal(t, []time.Duration{time.Hour},
		delaysOf(t, transient, retry.WithBackoff(retry.BackoffFunc(func(int) time.Duration { return time.Hour })), retry.WithMaxAttempts(2)),
		"a custom schedule is honoured too")
}

func TestDo_defaultMaxDelayCapsOnlyServerSuppliedDelays(t *testing.T) {
	hinted := func() error { return retry.After(errTransient, time.Hour) }
	assert.Equal(t, []time.Duration{(30 * time.Second), (30 * time.Second)},
		delaysOf(t, hinted, retry.WithBackoff(retry.Constant(2*time.Minute))),
		"a Retry-After of 1h is still capped at DefaultMaxDelay")
}

func TestDo_explicitMaxDelayCapsBackoffAndHints(t *testing.T) {
	transient := func() error { return errTransient }
	hinted := func() error { return retry.After(errTransient, time.Hour) }
	assert.Equal(t, []time.Duration{time.Minute, time.Minute},
		delaysOf(t, transient, retry.WithBackoff(retry.Constant(2*time.Minute)), retry.WithMaxDelay(time.Minute)))
	assert.Equal(t, []time.Duration{time.Minute, time.Minute},
		delaysOf(t, hinted, retry.WithMaxDelay(time.Minute)))
	assert.Equal(t, []time.Duration{2 * time.Hour},
		delaysOf(t, func() error { return retry.After(errTransient, 2*time.Hour) }, retry.WithMaxDelay(3*time.Hour), retry.WithMaxAttempts(2)),
		"an explicit cap above the default lets a longer hint through")
}

// TestNew_defaultBudgetUnlessAnOptionSetsOne: New gives a Retrier its
// default budget unless an option sets one, to nil included, and the last
// OverloadOptions.Budget wins; With keeps the budget of the Retrier it builds on, and
// the zero Retrier has none.
func TestNew_defaultBudgetUnlessAnOptionSetsOne(t *testing.T) {
	refused := func(r *retry.Retrier) int {
		n := 0
		for range 200 {
			var e *retry.Error
			err := r.Do(context.Background(), func(context.Context) error { return errTransient })
			if errors.As(err, &e) && e.Outcome == retry.OutcomeRefused {
				n++
			}
		}
		return n
	}
	zeroWaits := retry.WithBackoff(retry.Constant(0))
	noRetries, err := overload.NewRatio(overload.RatioOptions{Ratio: overload.None, MinPerSecond: overload.None})
	require.NoError(t, err)
	var zero retry.Retrier
	fromZero, err := zero.With(zeroWaits)
	require.NoError(t, err)
	fromNew, err := mustNew(t, zeroWaits).With(retry.WithName("charge"))
	require.NoError(t, err)

	assert.Positive(t, refused(mustNew(t, zeroWaits)), "New's default budget")
	assert.Positive(t, refused(fromNew), "With on New's Retrier")
	assert.Equal(t, 200, refused(mustNew(t, retry.WithOverload(&retry.OverloadOptions{NoBudget: true}), zeroWaits, retry.WithOverload(&retry.OverloadOptions{Budget: noRetries}))), "the last budget set")
	assert.Zero(t, refused(mustNew(t, zeroWaits, retry.WithOverload(&retry.OverloadOptions{NoBudget: true}))), "WithOverload(&OverloadOptions{NoBudget: true})")
	assert.Zero(t, refused(fromZero), "With on the zero Retrier")
}
