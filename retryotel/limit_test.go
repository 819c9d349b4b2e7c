package retryotel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retryotel"
)

// fixedStats is a limit whose figures the test sets.
type fixedStats overload.LimitStats

func (f *fixedStats) Stats() overload.LimitStats { return overload.LimitStats(*f) }

// newReader returns a meter provider with a manual reader, and a function
// that collects the metrics by name.
func newReader(t *testing.T) (*sdkmetric.MeterProvider, func() map[string]metricdata.Metrics) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp, func() map[string]metricdata.Metrics {
		t.Helper()
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		byName := map[string]metricdata.Metrics{}
		for _, sm := range rm.ScopeMetrics {
			assert.Equal(t, retryotel.ScopeName, sm.Scope.Name)
			for _, m := range sm.Metrics {
				byName[m.Name] = m
			}
		}
		return byName
	}
}

// limitFigures is what RegisterLimit reports for limits by downstream
// name, each with its limit, in flight, queued and refused.
func limitFigures(limits map[string][4]int64) []metricdata.Metrics {
	points := func(i int) []metricdata.DataPoint[int64] {
		var ps []metricdata.DataPoint[int64]
		for name, f := range limits {
			ps = append(ps, metricdata.DataPoint[int64]{Attributes: attribute.NewSet(retryotel.DownstreamKey.String(name)), Value: f[i]})
		}
		return ps
	}
	return []metricdata.Metrics{
		counter("retry.concurrency_limit", "{attempt}", "Attempts the concurrency limit lets in flight.", false, points(0)...),
		counter("retry.concurrency_limit.in_flight", "{attempt}", "Attempts holding a permit of the concurrency limit.", false, points(1)...),
		counter("retry.concurrency_limit.queued", "{attempt}", "First attempts waiting for a permit of the concurrency limit.", false, points(2)...),
		counter("retry.concurrency_limit.refused", "{attempt}", "Attempts the concurrency limit refused.", true, points(3)...),
	}
}

// TestRegisterLimit_figures: each of the limit's figures is its own
// instrument, read at each collection, until the registration ends.
func TestRegisterLimit_figures(t *testing.T) {
	t.Parallel()
	mp, collect := newReader(t)
	stats := &fixedStats{Limit: 7, InFlight: 5, Queued: 3, Refused: 11}
	reg, err := retryotel.RegisterLimit(mp, "payments-api", stats)
	require.NoError(t, err)
	check := func(f [4]int64) {
		t.Helper()
		got := collect()
		for _, want := range limitFigures(map[string][4]int64{"payments-api": f}) {
			metricdatatest.AssertEqual(t, want, got[want.Name], metricdatatest.IgnoreTimestamp())
		}
	}
	check([4]int64{7, 5, 3, 11})
	*stats = fixedStats{Limit: 6, Refused: 12}
	check([4]int64{6, 0, 0, 12})

	require.NoError(t, reg.Unregister())
	assert.Empty(t, collect(), "no figures after Unregister")
}

// TestRegisterLimit_adaptive reports an overload.Adaptive that a Retrier
// uses, beside another limit and the Observer: the attempt the limit
// refused shows in its refused count, and its call in retry.refusals.
func TestRegisterLimit_adaptive(t *testing.T) {
	t.Parallel()
	mp, collect := newReader(t)
	obs, err := retryotel.New(mp, retryotel.Options{})
	require.NoError(t, err)
	payments, err := overload.NewAdaptive(overload.AdaptiveOptions{Min: 1, Max: 1})
	require.NoError(t, err)
	ledger, err := overload.NewAdaptive(overload.AdaptiveOptions{Initial: 30})
	require.NoError(t, err)
	for name, l := range map[string]*overload.Adaptive{"payments-api": payments, "ledger": ledger} {
		_, err := retryotel.RegisterLimit(mp, name, l)
		require.NoError(t, err)
	}
	r, err := retry.New(retry.WithName("charge-card"), retry.WithObserver(obs),
		retry.WithOverload(&retry.OverloadOptions{Limit: payments}))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, payments.Acquire(ctx, overload.Attempt{})) // another caller's attempt
	require.ErrorIs(t, r.Do(ctx, func(context.Context) error { return nil }), overload.ErrLimitExceeded)

	got := collect()
	for _, want := range limitFigures(map[string][4]int64{"payments-api": {1, 1, 0, 1}, "ledger": {30, 0, 0, 0}}) {
		metricdatatest.AssertEqual(t, want, got[want.Name], metricdatatest.IgnoreTimestamp())
	}
	metricdatatest.AssertEqual(t, refusals("charge-card", 0, 0, 1, 0, 0), got["retry.refusals"],
		metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	payments.Release(overload.Answered, 0)
}

func TestRegisterLimit_errors(t *testing.T) {
	t.Parallel()
	mp, _ := newReader(t)
	l, err := overload.NewAdaptive(overload.AdaptiveOptions{})
	require.NoError(t, err)
	cases := []struct {
		name       string
		mp         metric.MeterProvider
		downstream string
		limit      interface{ Stats() overload.LimitStats }
		want       string
	}{
		{name: "nil_provider", downstream: "payments-api", limit: l, want: "retryotel.RegisterLimit: the meter provider is nil; pass otel.GetMeterProvider() for the global one"},
		{name: "typed_nil_provider", mp: (*sdkmetric.MeterProvider)(nil), downstream: "payments-api", limit: l, want: "the meter provider is nil (a nil *metric.MeterProvider)"},
		{name: "empty_name", mp: mp, limit: l, want: "retryotel.RegisterLimit: the downstream's name is empty"},
		{name: "long_name", mp: mp, downstream: strings.Repeat("x", 129), limit: l, want: "the downstream's name is 129 bytes, longer than 128"},
		{name: "nil_limit", mp: mp, downstream: "payments-api", want: "retryotel.RegisterLimit: the limit is nil"},
		{name: "typed_nil_limit", mp: mp, downstream: "payments-api", limit: (*overload.Adaptive)(nil), want: "the limit is nil (a nil *overload.Adaptive)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg, err := retryotel.RegisterLimit(tc.mp, tc.downstream, tc.limit)
			assert.Nil(t, reg)
			assert.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}
