package retryotel_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrymetrics"
	"github.com/steadfast-go/retry/retrymetrics/metricstest"
	"github.com/steadfast-go/retry/retryotel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	errFlaky = metricstest.ErrFlaky
	failing  = metricstest.Failing
)

// newObserver returns an Observer on a meter provider with a manual
// reader, and a function that collects one metric by name.
func newObserver(t *testing.T, opts retryotel.Options) (*retryotel.Observer, func(name string) metricdata.Metrics) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	obs, err := retryotel.New(mp, opts)
	require.NoError(t, err)
	collect := func(name string) metricdata.Metrics {
		t.Helper()
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		for _, sm := range rm.ScopeMetrics {
			assert.Equal(t, retryotel.ScopeName, sm.Scope.Name)
			for _, m := range sm.Metrics {
				if m.Name == name {
					return m
				}
			}
		}
		t.Fatalf("no metric %s", name)
		return metricdata.Metrics{}
	}
	return obs, collect
}

func opSet(op string, kv ...attribute.KeyValue) attribute.Set {
	return attribute.NewSet(append([]attribute.KeyValue{retryotel.OperationKey.String(op)}, kv...)...)
}

func counter(name, unit, desc string, monotonic bool, points ...metricdata.DataPoint[int64]) metricdata.Metrics {
	return metricdata.Metrics{Name: name, Unit: unit, Description: desc, Data: metricdata.Sum[int64]{
		Temporality: metricdata.CumulativeTemporality, IsMonotonic: monotonic, DataPoints: points,
	}}
}

// refusals is the retry.refusals metric of op, by budget, breaker and
// limit.
func refusals(op string, budget, breaker, limit, rate, pause int64) metricdata.Metrics {
	point := func(by string, v int64) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Attributes: opSet(op, retryotel.RefusedByKey.String(by)), Value: v}
	}
	return counter("retry.refusals", "{call}", "Refused calls, by who refused them: a retry budget, a circuit breaker, a concurrency limit, a rate limit or a pause.", true,
		point("budget", budget), point("breaker", breaker), point("limit", limit), point("rate", rate), point("pause", pause))
}

func TestObserver_metrics(t *testing.T) {
	t.Parallel()
	obs, collect := newObserver(t, retryotel.Options{DurationBuckets: []float64{1, 10}})
	metricstest.ThreeCalls(t, obs)
	op := opSet("charge-card")
	outcome := func(o string, v int64) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Attributes: opSet("charge-card", retryotel.OutcomeKey.String(o)), Value: v}
	}
	dl := func(r string) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Attributes: opSet("charge-card", retryotel.DeadLetterResultKey.String(r))}
	}
	want := []metricdata.Metrics{
		counter("retry.calls", "{call}", "Calls ended, by outcome.", true,
			outcome("success", 1), outcome("permanent", 1), outcome("exhausted", 1), outcome("max-elapsed", 0),
			outcome("deadline", 0), outcome("canceled", 0), outcome("refused", 0), outcome("unknown", 0), outcome("handed-off", 0)),
		counter("retry.attempts", "{attempt}", "Attempts made, first attempts included.", true,
			metricdata.DataPoint[int64]{Attributes: op, Value: 7}),
		counter("retry.retries", "{attempt}", "Attempts after the first of their call.", true,
			metricdata.DataPoint[int64]{Attributes: op, Value: 4}),
		counter("retry.calls.in_flight", "{call}", "Calls between their first attempt and their end.", false,
			metricdata.DataPoint[int64]{Attributes: op, Value: 0}),
		counter("retry.waits.in_progress", "{call}", "Calls waiting before their next attempt.", false,
			metricdata.DataPoint[int64]{Attributes: op, Value: 0}),
		counter("retry.dead_letters", "{call}", "Dead letters of failed calls, by result: recorded by a sink, or failed in every sink.", true,
			dl("recorded"), dl("failed")),
		refusals("charge-card", 0, 0, 0, 0, 0),
		{Name: "retry.call.attempts", Unit: "{attempt}", Description: "Attempts per ended call.", Data: metricdata.Histogram[int64]{
			Temporality: metricdata.CumulativeTemporality,
			DataPoints: []metricdata.HistogramDataPoint[int64]{{
				Attributes: op, Count: 3, Sum: 7, Min: metricdata.NewExtrema[int64](1), Max: metricdata.NewExtrema[int64](3),
				Bounds:       []float64{1, 2, 3, 4, 5, 10, 100, 1000},
				BucketCounts: []uint64{1, 0, 2, 0, 0, 0, 0, 0, 0},
			}},
		}},
		{Name: "retry.call.duration", Unit: "s", Description: "Time from the start of a call to its end, waits included.", Data: metricdata.Histogram[float64]{
			Temporality: metricdata.CumulativeTemporality,
			DataPoints: []metricdata.HistogramDataPoint[float64]{{
				Attributes: op, Count: 3, Sum: 4, Min: metricdata.NewExtrema[float64](0), Max: metricdata.NewExtrema[float64](2),
				Bounds: []float64{1, 10}, BucketCounts: []uint64{1, 2, 0},
			}},
		}},
	}
	for _, w := range want {
		metricdatatest.AssertEqual(t, w, collect(w.Name), metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	}
}

func TestObserver_spanEvents(t *testing.T) {
	t.Parallel()
	obs, _ := newObserver(t, retryotel.Options{})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	synctest.Test(t, func(t *testing.T) {
		ctx, span := tp.Tracer("test").Start(t.Context(), "charge")
		err := retry.Do(ctx, failing(3, nil), retry.WithName("charge-card"), retry.WithObserver(obs),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter))
		require.NoError(t, err)
		err = retry.Do(ctx, failing(1, retry.Permanent(errFlaky)), retry.WithName("charge-card"), retry.WithObserver(obs))
		require.Error(t, err)
		span.End()
	})
	spans := rec.Ended()
	require.Len(t, spans, 1)
	type event struct {
		Name  string
		Attrs []attribute.KeyValue
	}
	var got []event
	for _, e := range spans[0].Events() {
		got = append(got, event{e.Name, e.Attributes})
	}
	op := retryotel.OperationKey.String("charge-card")
	want := []event{
		{"retry", []attribute.KeyValue{op, attribute.Int("retry.attempt", 1), attribute.Float64("retry.delay", 1), attribute.String("error.message", "flaky")}},
		{"retry", []attribute.KeyValue{op, attribute.Int("retry.attempt", 2), attribute.Float64("retry.delay", 1), attribute.String("error.message", "flaky")}},
		{"retry.done", []attribute.KeyValue{op, retryotel.OutcomeKey.String("success"), attribute.Int("retry.attempts", 3), attribute.Float64("retry.elapsed", 2)}},
		{"retry.done", []attribute.KeyValue{op, retryotel.OutcomeKey.String("permanent"), attribute.Int("retry.attempts", 1), attribute.Float64("retry.elapsed", 0),
			attribute.String("error.message", "retry: permanent error after 1 attempt: flaky")}},
	}
	assert.Equal(t, want, got)
}

func TestObserver_deadLetterOnSpan(t *testing.T) {
	t.Parallel()
	obs, collect := newObserver(t, retryotel.Options{})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(t.Context(), "charge")
	obs.OnDone(ctx, retry.Done{Name: "op", Outcome: retry.OutcomeExhausted, Attempts: 3, DeadLetterFailed: true})
	obs.OnDone(ctx, retry.Done{Name: "op", Outcome: retry.OutcomeExhausted, Attempts: 3, DeadLettered: true})
	obs.OnDone(ctx, retry.Done{Name: "op", Outcome: retry.OutcomeExhausted, Attempts: 3, DeadLettered: true})
	span.End()
	events := rec.Ended()[0].Events()
	require.Len(t, events, 3)
	assert.Contains(t, events[0].Attributes, attribute.String("retry.dead_letter", "failed"))
	assert.Contains(t, events[1].Attributes, attribute.String("retry.dead_letter", "recorded"))
	metricdatatest.AssertEqual(t,
		counter("retry.dead_letters", "{call}", "Dead letters of failed calls, by result: recorded by a sink, or failed in every sink.", true,
			metricdata.DataPoint[int64]{Attributes: opSet("op", retryotel.DeadLetterResultKey.String("recorded")), Value: 2},
			metricdata.DataPoint[int64]{Attributes: opSet("op", retryotel.DeadLetterResultKey.String("failed")), Value: 1}),
		collect("retry.dead_letters"), metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

func TestObserver_cardinalityIsBounded(t *testing.T) {
	t.Parallel()
	obs, collect := newObserver(t, retryotel.Options{MaxOperations: 3})
	ctx := t.Context()
	for _, name := range []string{"a", "", "b", "c", "d", "a", "\xff", "other"} {
		obs.OnAttemptStart(ctx, retry.AttemptStart{Name: name, Attempt: 2})
	}
	point := func(op string, v int64) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Attributes: opSet(op), Value: v}
	}
	metricdatatest.AssertEqual(t,
		counter("retry.retries", "{attempt}", "Attempts after the first of their call.", true,
			point("a", 2), point("unnamed", 1), point("b", 1), point("other", 4)),
		collect("retry.retries"), metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

// TestObserver_longNames: a name longer than retrymetrics.MaxNameLen
// bytes is reported as "other" on the metrics.
func TestObserver_longNames(t *testing.T) {
	t.Parallel()
	obs, collect := newObserver(t, retryotel.Options{})
	ctx := t.Context()
	longest := strings.Repeat("x", retrymetrics.MaxNameLen)
	for _, name := range []string{strings.Repeat("y", 1000), longest + "y", longest} {
		obs.OnAttemptStart(ctx, retry.AttemptStart{Name: name, Attempt: 1})
	}
	point := func(op string, v int64) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Attributes: opSet(op), Value: v}
	}
	metricdatatest.AssertEqual(t,
		counter("retry.attempts", "{attempt}", "Attempts made, first attempts included.", true,
			point("other", 2), point(longest, 1)),
		collect("retry.attempts"), metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

// TestObserver_gauges checks the up-down counters while calls wait, and
// that they return to 0.
func TestObserver_gauges(t *testing.T) {
	t.Parallel()
	obs, collect := newObserver(t, retryotel.Options{})
	value := func(name string) func() float64 {
		return func() float64 {
			var sum int64
			for _, p := range collect(name).Data.(metricdata.Sum[int64]).DataPoints {
				sum += p.Value
			}
			return float64(sum)
		}
	}
	metricstest.Gauges(t, obs, value("retry.calls.in_flight"), value("retry.waits.in_progress"))
}

func TestNew_errors(t *testing.T) {
	t.Parallel()
	mp := sdkmetric.NewMeterProvider()
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	cases := []struct {
		name string
		mp   metric.MeterProvider
		opts retryotel.Options
		want string
	}{
		{name: "nil_provider", opts: retryotel.Options{}, want: "the meter provider is nil"},
		{name: "typed_nil_provider", mp: (*sdkmetric.MeterProvider)(nil), want: "the meter provider is nil (a nil *metric.MeterProvider)"},
		{name: "negative_max", mp: mp, opts: retryotel.Options{MaxOperations: -1}, want: "retryotel.New: MaxOperations -1 is negative"},
		{name: "empty_buckets", mp: mp, opts: retryotel.Options{DurationBuckets: []float64{}}, want: "retryotel.New: DurationBuckets [] must be"},
		{name: "unordered_buckets", mp: mp, opts: retryotel.Options{DurationBuckets: []float64{2, 1}}, want: "retryotel.New: DurationBuckets [2 1] must be"},
		{name: "nan_bucket", mp: mp, opts: retryotel.Options{DurationBuckets: []float64{math.NaN()}}, want: "retryotel.New: DurationBuckets [NaN]: bound 0 is NaN; bounds must be finite"},
		{name: "inf_bucket", mp: mp, opts: retryotel.Options{DurationBuckets: []float64{-math.Inf(1), 1}}, want: "retryotel.New: DurationBuckets [-Inf 1]: bound 0 is -Inf; bounds must be finite"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			obs, err := retryotel.New(tc.mp, tc.opts)
			assert.Nil(t, obs)
			assert.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestObserver_noAllocation(t *testing.T) {
	obs, _ := newObserver(t, retryotel.Options{})
	metricstest.NoAllocation(t, obs)
}

// TestObserver_callWithoutAttempt: a call whose context is done before
// its first attempt ends without having been in flight, so it must not
// take the up-down counter below 0. (Gauges and ThreeCalls make no such
// call.)
func TestObserver_callWithoutAttempt(t *testing.T) {
	t.Parallel()
	obs, collect := newObserver(t, retryotel.Options{})
	// A first call that succeeds makes the counter's data point, at 0.
	require.NoError(t, retry.Do(t.Context(), failing(1, nil), retry.WithName("op"), retry.WithObserver(obs)))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := retry.Do(ctx, failing(1, nil), retry.WithName("op"), retry.WithObserver(obs))
	require.ErrorIs(t, err, context.Canceled)
	metricdatatest.AssertEqual(t,
		counter("retry.calls.in_flight", "{call}", "Calls between their first attempt and their end.", false,
			metricdata.DataPoint[int64]{Attributes: opSet("op"), Value: 0}),
		collect("retry.calls.in_flight"), metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	calls := collect("retry.calls").Data.(metricdata.Sum[int64]).DataPoints
	canceled := opSet("op", retryotel.OutcomeKey.String("canceled"))
	assert.True(t, slices.ContainsFunc(calls, func(p metricdata.DataPoint[int64]) bool {
		return p.Attributes.Equals(&canceled) && p.Value == 1
	}), "the call is counted as canceled: %v", calls)
}

// TestObserver_refusals counts the calls a budget, a breaker, a limit, a
// rate or a pause refused with retry.outcome "refused", and each by who
// refused it.
func TestObserver_refusals(t *testing.T) {
	t.Parallel()
	obs, collect := newObserver(t, retryotel.Options{})
	sum := func(name string) func() float64 {
		return func() float64 {
			var s int64
			for _, p := range collect(name).Data.(metricdata.Sum[int64]).DataPoints {
				s += p.Value
			}
			return float64(s)
		}
	}
	metricstest.Refusals(t, obs, sum("retry.calls.in_flight"), sum("retry.waits.in_progress"))
	refused := int64(-1)
	for _, p := range collect("retry.calls").Data.(metricdata.Sum[int64]).DataPoints {
		if v, ok := p.Attributes.Value(retryotel.OutcomeKey); ok && v.AsString() == "refused" {
			refused = p.Value
		}
	}
	assert.Equal(t, int64(5), refused)
	assert.Equal(t, float64(4), sum("retry.attempts")())
	metricdatatest.AssertEqual(t, refusals("op", 1, 1, 1, 1, 1), collect("retry.refusals"),
		metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

// TestObserver_refusedBy: a refusal counts once, by the first of budget,
// breaker, limit, rate and pause its error matches, and says so on its
// span event;
// one that matches none, and the errors of other outcomes, count in no
// refusal series.
func TestObserver_refusedBy(t *testing.T) {
	t.Parallel()
	obs, collect := newObserver(t, retryotel.Options{})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(t.Context(), "charge")
	for _, err := range []error{
		fmt.Errorf("limit of payments-api: %w", overload.ErrLimitExceeded),
		errors.Join(overload.ErrLimitExceeded, overload.ErrCircuitOpen),
		errors.Join(overload.ErrLimitExceeded, overload.ErrBudgetExhausted),
		errors.Join(overload.ErrRateLimited, overload.ErrPaused),
		retry.After(overload.ErrPaused, time.Second),
		errors.New("a limit of one's own"),
	} {
		obs.OnDone(ctx, retry.Done{Name: "op", Outcome: retry.OutcomeRefused, Attempts: 1, Err: err})
	}
	obs.OnDone(ctx, retry.Done{Name: "op", Outcome: retry.OutcomeExhausted, Attempts: 1, Err: overload.ErrLimitExceeded})
	obs.OnDone(ctx, retry.Done{Name: "op", Outcome: retry.OutcomeDeadline, Attempts: 1, Err: overload.ErrPaused})
	span.End()
	metricdatatest.AssertEqual(t, refusals("op", 1, 1, 1, 1, 1), collect("retry.refusals"),
		metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	var by []any
	for _, e := range rec.Ended()[0].Events() {
		var v any
		for _, a := range e.Attributes {
			if a.Key == retryotel.RefusedByKey {
				v = a.Value.AsString()
			}
		}
		by = append(by, v)
	}
	assert.Equal(t, []any{"limit", "breaker", "budget", "rate", "pause", nil, nil, nil}, by)
}
