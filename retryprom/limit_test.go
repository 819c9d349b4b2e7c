package retryprom_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retryprom"
)

// fixedStats is a limit whose figures the test sets.
type fixedStats overload.LimitStats

func (f *fixedStats) Stats() overload.LimitStats { return overload.LimitStats(*f) }

// TestLimitCollector_figures: each of the limit's figures is its own
// metric, read at each scrape.
func TestLimitCollector_figures(t *testing.T) {
	t.Parallel()
	stats := &fixedStats{Limit: 7, InFlight: 5, Queued: 3, Refused: 11}
	c, err := retryprom.NewLimitCollector("payments-api", stats, retryprom.LimitOptions{})
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	want := func(limit, inFlight, queued, refused string) string {
		return `
# HELP retry_concurrency_limit Attempts the concurrency limit lets in flight.
# TYPE retry_concurrency_limit gauge
retry_concurrency_limit{downstream="payments-api"} ` + limit + `
# HELP retry_concurrency_limit_in_flight Attempts holding a permit of the concurrency limit.
# TYPE retry_concurrency_limit_in_flight gauge
retry_concurrency_limit_in_flight{downstream="payments-api"} ` + inFlight + `
# HELP retry_concurrency_limit_queued First attempts waiting for a permit of the concurrency limit.
# TYPE retry_concurrency_limit_queued gauge
retry_concurrency_limit_queued{downstream="payments-api"} ` + queued + `
# HELP retry_concurrency_limit_refused_total Attempts the concurrency limit refused.
# TYPE retry_concurrency_limit_refused_total counter
retry_concurrency_limit_refused_total{downstream="payments-api"} ` + refused + `
`
	}
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want("7", "5", "3", "11"))))
	*stats = fixedStats{Limit: 6, InFlight: 0, Queued: 0, Refused: 12}
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want("6", "0", "0", "12"))))
}

// TestLimitCollector_adaptive exports an overload.Adaptive that a
// Retrier uses, beside the Observer and another limit's collector: the
// attempt the limit refused shows in its refused total, and its call in
// retry_refusals_total.
func TestLimitCollector_adaptive(t *testing.T) {
	t.Parallel()
	obs, reg := newObserver(t, retryprom.Options{})
	payments, err := overload.NewAdaptive(overload.AdaptiveOptions{Min: 1, Max: 1})
	require.NoError(t, err)
	ledger, err := overload.NewAdaptive(overload.AdaptiveOptions{Initial: 30})
	require.NoError(t, err)
	for name, l := range map[string]*overload.Adaptive{"payments-api": payments, "ledger": ledger} {
		c, err := retryprom.NewLimitCollector(name, l, retryprom.LimitOptions{})
		require.NoError(t, err)
		require.NoError(t, reg.Register(c))
	}
	r, err := retry.New(retry.WithName("charge-card"), retry.WithObserver(obs),
		retry.WithOverload(&retry.OverloadOptions{Limit: payments}))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, payments.Acquire(ctx, overload.Attempt{})) // another caller's attempt
	require.ErrorIs(t, r.Do(ctx, func(context.Context) error { return nil }), overload.ErrLimitExceeded)

	want := `
# HELP retry_concurrency_limit Attempts the concurrency limit lets in flight.
# TYPE retry_concurrency_limit gauge
retry_concurrency_limit{downstream="ledger"} 30
retry_concurrency_limit{downstream="payments-api"} 1
# HELP retry_concurrency_limit_in_flight Attempts holding a permit of the concurrency limit.
# TYPE retry_concurrency_limit_in_flight gauge
retry_concurrency_limit_in_flight{downstream="ledger"} 0
retry_concurrency_limit_in_flight{downstream="payments-api"} 1
# HELP retry_concurrency_limit_refused_total Attempts the concurrency limit refused.
# TYPE retry_concurrency_limit_refused_total counter
retry_concurrency_limit_refused_total{downstream="ledger"} 0
retry_concurrency_limit_refused_total{downstream="payments-api"} 1
# HELP retry_refusals_total Refused calls, by who refused them: a retry budget, a circuit breaker, a concurrency limit, a rate limit or a pause.
# TYPE retry_refusals_total counter
retry_refusals_total{operation="charge-card",refused_by="breaker"} 0
retry_refusals_total{operation="charge-card",refused_by="budget"} 0
retry_refusals_total{operation="charge-card",refused_by="limit"} 1
retry_refusals_total{operation="charge-card",refused_by="pause"} 0
retry_refusals_total{operation="charge-card",refused_by="rate"} 0
`
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"retry_concurrency_limit", "retry_concurrency_limit_in_flight", "retry_concurrency_limit_refused_total", "retry_refusals_total"))

	payments.Release(overload.Answered, 0)
	require.NoError(t, r.Do(ctx, func(context.Context) error { return nil }))
	assert.Equal(t, float64(0), sumGauge(t, reg, "retry_concurrency_limit_in_flight"))
}

func TestNewLimitCollector_errors(t *testing.T) {
	t.Parallel()
	l, err := overload.NewAdaptive(overload.AdaptiveOptions{})
	require.NoError(t, err)
	cases := []struct {
		name       string
		downstream string
		limit      interface{ Stats() overload.LimitStats }
		opts       retryprom.LimitOptions
		want       string
	}{
		{name: "empty_name", limit: l, want: "retryprom.NewLimitCollector: the downstream's name is empty"},
		{name: "long_name", downstream: strings.Repeat("x", 129), limit: l, want: "the downstream's name is 129 bytes, longer than 128"},
		{name: "nil_limit", downstream: "payments-api", want: "retryprom.NewLimitCollector: the limit is nil"},
		{name: "typed_nil_limit", downstream: "payments-api", limit: (*overload.Adaptive)(nil), want: "the limit is nil (a nil *overload.Adaptive)"},
		{name: "bad_namespace", downstream: "payments-api", limit: l, opts: retryprom.LimitOptions{Namespace: "9 lives"}, want: `Namespace "9 lives" must be`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := retryprom.NewLimitCollector(tc.downstream, tc.limit, tc.opts)
			assert.Nil(t, c)
			assert.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("registered_twice", func(t *testing.T) {
		t.Parallel()
		reg := prometheus.NewRegistry()
		for i, opts := range []retryprom.LimitOptions{{}, {}, {Namespace: "payments_retry"}} {
			c, err := retryprom.NewLimitCollector("payments-api", l, opts)
			require.NoError(t, err)
			err = reg.Register(c)
			if i == 1 {
				var are prometheus.AlreadyRegisteredError
				assert.ErrorAs(t, err, &are, "a second collector of one name")
			} else {
				assert.NoError(t, err, "another namespace registers beside it")
			}
		}
	})
}
