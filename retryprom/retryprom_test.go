package retryprom_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrymetrics"
	"github.com/steadfast-go/retry/retrymetrics/metricstest"
	"github.com/steadfast-go/retry/retryprom"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	errFlaky = metricstest.ErrFlaky
	failing  = metricstest.Failing
)

func newObserver(t *testing.T, opts retryprom.Options) (*retryprom.Observer, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	obs, err := retryprom.New(reg, opts)
	require.NoError(t, err)
	return obs, reg
}

func TestObserver_metrics(t *testing.T) {
	t.Parallel()
	obs, reg := newObserver(t, retryprom.Options{DurationBuckets: []float64{1, 10}})
	metricstest.ThreeCalls(t, obs)
	want := `
# HELP retry_attempts_per_call Attempts per ended call.
# TYPE retry_attempts_per_call histogram
retry_attempts_per_call_bucket{operation="charge-card",le="1"} 1
retry_attempts_per_call_bucket{operation="charge-card",le="2"} 1
retry_attempts_per_call_bucket{operation="charge-card",le="3"} 3
retry_attempts_per_call_bucket{operation="charge-card",le="4"} 3
retry_attempts_per_call_bucket{operation="charge-card",le="5"} 3
retry_attempts_per_call_bucket{operation="charge-card",le="10"} 3
retry_attempts_per_call_bucket{operation="charge-card",le="100"} 3
retry_attempts_per_call_bucket{operation="charge-card",le="1000"} 3
retry_attempts_per_call_bucket{operation="charge-card",le="+Inf"} 3
retry_attempts_per_call_sum{operation="charge-card"} 7
retry_attempts_per_call_count{operation="charge-card"} 3
# HELP retry_attempts_total Attempts made, first attempts included.
# TYPE retry_attempts_total counter
retry_attempts_total{operation="charge-card"} 7
# HELP retry_call_duration_seconds Time from the start of a call to its end, waits included.
# TYPE retry_call_duration_seconds histogram
retry_call_duration_seconds_bucket{operation="charge-card",le="1"} 1
retry_call_duration_seconds_bucket{operation="charge-card",le="10"} 3
retry_call_duration_seconds_bucket{operation="charge-card",le="+Inf"} 3
retry_call_duration_seconds_sum{operation="charge-card"} 4
retry_call_duration_seconds_count{operation="charge-card"} 3
# HELP retry_calls_in_flight Calls between their first attempt and their end.
# TYPE retry_calls_in_flight gauge
retry_calls_in_flight{operation="charge-card"} 0
# HELP retry_calls_total Calls ended, by outcome.
# TYPE retry_calls_total counter
retry_calls_total{operation="charge-card",outcome="canceled"} 0
retry_calls_total{operation="charge-card",outcome="deadline"} 0
retry_calls_total{operation="charge-card",outcome="exhausted"} 1
retry_calls_total{operation="charge-card",outcome="max-elapsed"} 0
retry_calls_total{operation="charge-card",outcome="permanent"} 1
retry_calls_total{operation="charge-card",outcome="refused"} 0
retry_calls_total{operation="charge-card",outcome="success"} 1
retry_calls_total{operation="charge-card",outcome="unknown"} 0
retry_calls_total{operation="charge-card",outcome="handed-off"} 0
# HELP retry_dead_letters_total Dead letters of failed calls, by result: recorded by a sink, or failed in every sink.
# TYPE retry_dead_letters_total counter
retry_dead_letters_total{operation="charge-card",result="failed"} 0
retry_dead_letters_total{operation="charge-card",result="recorded"} 0
# HELP retry_refusals_total Refused calls, by who refused them: a retry budget, a circuit breaker, a concurrency limit, a rate limit or a pause.
# TYPE retry_refusals_total counter
retry_refusals_total{operation="charge-card",refused_by="breaker"} 0
retry_refusals_total{operation="charge-card",refused_by="budget"} 0
retry_refusals_total{operation="charge-card",refused_by="limit"} 0
retry_refusals_total{operation="charge-card",refused_by="pause"} 0
retry_refusals_total{operation="charge-card",refused_by="rate"} 0
# HELP retry_retries_total Attempts after the first of their call.
# TYPE retry_retries_total counter
retry_retries_total{operation="charge-card"} 4
# HELP retry_waits_in_progress Calls waiting before their next attempt.
# TYPE retry_waits_in_progress gauge
retry_waits_in_progress{operation="charge-card"} 0
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want)))
	require.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(want)))
}

func TestObserver_cardinalityIsBounded(t *testing.T) {
	t.Parallel()
	obs, _ := newObserver(t, retryprom.Options{MaxOperations: 3})
	ctx := t.Context()
	for _, name := range []string{"a", "", "b", "c", "d", "a", "\xff", "other"} {
		obs.OnAttemptStart(ctx, retry.AttemptStart{Name: name, Attempt: 1})
	}
	want := `
# HELP retry_attempts_total Attempts made, first attempts included.
# TYPE retry_attempts_total counter
retry_attempts_total{operation="a"} 2
retry_attempts_total{operation="b"} 1
retry_attempts_total{operation="other"} 4
retry_attempts_total{operation="unnamed"} 1
`
	assert.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(want), "retry_attempts_total"))
}

// TestObserver_longNames: a name longer than retrymetrics.MaxNameLen
// bytes is counted under "other", so that no label is longer than that.
func TestObserver_longNames(t *testing.T) {
	t.Parallel()
	obs, reg := newObserver(t, retryprom.Options{})
	ctx := t.Context()
	longest := strings.Repeat("x", retrymetrics.MaxNameLen)
	for _, name := range []string{strings.Repeat("y", 1000), longest + "y", longest} {
		obs.OnAttemptStart(ctx, retry.AttemptStart{Name: name, Attempt: 1})
		obs.OnDone(ctx, retry.Done{Name: name, Outcome: retry.OutcomeSuccess, Attempts: 1})
	}
	want := `
# HELP retry_attempts_total Attempts made, first attempts included.
# TYPE retry_attempts_total counter
retry_attempts_total{operation="other"} 2
retry_attempts_total{operation="` + longest + `"} 1
`
	assert.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(want), "retry_attempts_total"))
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				assert.LessOrEqual(t, len(l.GetValue()), retrymetrics.MaxNameLen, f.GetName())
			}
		}
	}
}

func TestObserver_specialNamesBeforeTheLimit(t *testing.T) {
	t.Parallel()
	obs, _ := newObserver(t, retryprom.Options{})
	ctx := t.Context()
	for _, name := range []string{"\xff", "other", "x"} {
		obs.OnAttemptStart(ctx, retry.AttemptStart{Name: name, Attempt: 1})
	}
	want := `
# HELP retry_attempts_total Attempts made, first attempts included.
# TYPE retry_attempts_total counter
retry_attempts_total{operation="other"} 2
retry_attempts_total{operation="x"} 1
`
	assert.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(want), "retry_attempts_total"))
}

// TestObserver_concurrentNames has many goroutines use more names than
// the limit at once: every attempt is counted once, under its own name or
// "other", and no more than the limit of names get series.
func TestObserver_concurrentNames(t *testing.T) {
	t.Parallel()
	const goroutines, names, perName, limit = 8, 40, 25, 10
	obs, reg := newObserver(t, retryprom.Options{MaxOperations: limit})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range names * perName {
				name := fmt.Sprintf("op-%d", (i+g)%names)
				obs.OnAttemptStart(t.Context(), retry.AttemptStart{Name: name, Attempt: 1})
				obs.OnDone(t.Context(), retry.Done{Name: name, Outcome: retry.OutcomeSuccess, Attempts: 1})
			}
		})
	}
	wg.Wait()
	families, err := reg.Gather()
	require.NoError(t, err)
	var total float64
	labels := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "retry_attempts_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels[m.GetLabel()[0].GetValue()] = true
			total += m.GetCounter().GetValue()
		}
	}
	assert.Equal(t, float64(goroutines*names*perName), total)
	assert.Len(t, labels, limit+1)
	assert.True(t, labels["other"])
	assert.Equal(t, float64(0), sumGauge(t, reg, "retry_calls_in_flight"))
}

func sumGauge(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	var sum float64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func TestObserver_gauges(t *testing.T) {
	t.Parallel()
	obs, reg := newObserver(t, retryprom.Options{})
	metricstest.Gauges(t, obs,
		func() float64 { return sumGauge(t, reg, "retry_calls_in_flight") },
		func() float64 { return sumGauge(t, reg, "retry_waits_in_progress") })
	want := `
# HELP retry_calls_total Calls ended, by outcome.
# TYPE retry_calls_total counter
retry_calls_total{operation="op",outcome="canceled"} 10
retry_calls_total{operation="op",outcome="deadline"} 10
retry_calls_total{operation="op",outcome="exhausted"} 0
retry_calls_total{operation="op",outcome="max-elapsed"} 0
retry_calls_total{operation="op",outcome="permanent"} 0
retry_calls_total{operation="op",outcome="refused"} 0
retry_calls_total{operation="op",outcome="success"} 0
retry_calls_total{operation="op",outcome="unknown"} 0
retry_calls_total{operation="op",outcome="handed-off"} 0
`
	assert.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(want), "retry_calls_total"))
}

func TestObserver_deadLetters(t *testing.T) {
	t.Parallel()
	obs, _ := newObserver(t, retryprom.Options{})
	ctx := t.Context()
	obs.OnDone(ctx, retry.Done{Name: "op", Outcome: retry.OutcomeExhausted, Attempts: 3, DeadLettered: true})
	obs.OnDone(ctx, retry.Done{Name: "op", Outcome: retry.OutcomeExhausted, Attempts: 3, DeadLettered: true})
	obs.OnDone(ctx, retry.Done{Name: "op", Outcome: retry.OutcomePermanent, Attempts: 1, DeadLetterFailed: true})
	want := `
# HELP retry_dead_letters_total Dead letters of failed calls, by result: recorded by a sink, or failed in every sink.
# TYPE retry_dead_letters_total counter
retry_dead_letters_total{operation="op",result="failed"} 1
retry_dead_letters_total{operation="op",result="recorded"} 2
`
	assert.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(want), "retry_dead_letters_total"))
}

func TestNew_errors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		reg  prometheus.Registerer
		opts retryprom.Options
		want string
	}{
		{name: "nil_registerer", opts: retryprom.Options{}, want: "the registerer is nil"},
		{name: "typed_nil_registerer", reg: (*prometheus.Registry)(nil), want: "the registerer is nil (a nil *prometheus.Registry)"},
		{name: "negative_max", reg: prometheus.NewRegistry(), opts: retryprom.Options{MaxOperations: -1}, want: "MaxOperations -1 is negative"},
		{name: "empty_buckets", reg: prometheus.NewRegistry(), opts: retryprom.Options{DurationBuckets: []float64{}}, want: "DurationBuckets [] must be"},
		{name: "unordered_buckets", reg: prometheus.NewRegistry(), opts: retryprom.Options{DurationBuckets: []float64{1, 1}}, want: "DurationBuckets [1 1] must be"},
		{name: "nan_bucket", reg: prometheus.NewRegistry(), opts: retryprom.Options{DurationBuckets: []float64{math.NaN()}}, want: "DurationBuckets [NaN]: bound 0 is NaN; bounds must be finite"},
		{name: "inf_bucket", reg: prometheus.NewRegistry(), opts: retryprom.Options{DurationBuckets: []float64{1, math.Inf(1)}}, want: "DurationBuckets [1 +Inf]: bound 1 is +Inf; bounds must be finite"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			obs, err := retryprom.New(tc.reg, tc.opts)
			assert.Nil(t, obs)
			assert.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("bad_namespace", func(t *testing.T) {
		t.Parallel()
		_, err := retryprom.New(prometheus.NewRegistry(), retryprom.Options{Namespace: "9 lives"})
		assert.ErrorIs(t, err, retry.ErrInvalidOption)
		assert.ErrorContains(t, err, `Namespace "9 lives" must be`)
	})
	t.Run("registered_twice", func(t *testing.T) {
		t.Parallel()
		reg := prometheus.NewRegistry()
		first, err := retryprom.New(reg, retryprom.Options{})
		require.NoError(t, err)
		_, err = retryprom.New(reg, retryprom.Options{})
		var are prometheus.AlreadyRegisteredError
		assert.ErrorAs(t, err, &are)
		// Another namespace registers beside it.
		_, err = retryprom.New(reg, retryprom.Options{Namespace: "payments_retry"})
		assert.NoError(t, err)
		first.OnAttemptStart(t.Context(), retry.AttemptStart{Name: "op", Attempt: 1})
		assert.Equal(t, 1, testutil.CollectAndCount(first, "retry_attempts_total"))
	})
}

func TestObserver_noAllocation(t *testing.T) {
	obs, _ := newObserver(t, retryprom.Options{})
	metricstest.NoAllocation(t, obs)
}

// TestObserver_callWithoutAttempt: a call whose context is done before
// its first attempt ends without having been in flight, so it must not
// take the gauge below 0. (Gauges and ThreeCalls make no such call.)
func TestObserver_callWithoutAttempt(t *testing.T) {
	t.Parallel()
	obs, reg := newObserver(t, retryprom.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := retry.Do(ctx, failing(1, nil), retry.WithName("op"), retry.WithObserver(obs))
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, float64(0), sumGauge(t, reg, "retry_waits_in_progress"))
	want := `
# HELP retry_calls_in_flight Calls between their first attempt and their end.
# TYPE retry_calls_in_flight gauge
retry_calls_in_flight{operation="op"} 0
# HELP retry_calls_total Calls ended, by outcome.
# TYPE retry_calls_total counter
retry_calls_total{operation="op",outcome="canceled"} 1
retry_calls_total{operation="op",outcome="deadline"} 0
retry_calls_total{operation="op",outcome="exhausted"} 0
retry_calls_total{operation="op",outcome="max-elapsed"} 0
retry_calls_total{operation="op",outcome="permanent"} 0
retry_calls_total{operation="op",outcome="refused"} 0
retry_calls_total{operation="op",outcome="success"} 0
retry_calls_total{operation="op",outcome="unknown"} 0
retry_calls_total{operation="op",outcome="handed-off"} 0
`
	assert.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(want), "retry_calls_in_flight", "retry_calls_total"))
}

// TestObserver_refusals counts the calls a budget, a breaker, a limit, a
// rate or a pause refused as outcome="refused", and each by who refused
// it.
func TestObserver_refusals(t *testing.T) {
	t.Parallel()
	obs, reg := newObserver(t, retryprom.Options{})
	metricstest.Refusals(t, obs,
		func() float64 { return sumGauge(t, reg, "retry_calls_in_flight") },
		func() float64 { return sumGauge(t, reg, "retry_waits_in_progress") })
	want := `
# HELP retry_calls_total Calls ended, by outcome.
# TYPE retry_calls_total counter
retry_calls_total{operation="op",outcome="canceled"} 0
retry_calls_total{operation="op",outcome="deadline"} 0
retry_calls_total{operation="op",outcome="exhausted"} 0
retry_calls_total{operation="op",outcome="max-elapsed"} 0
retry_calls_total{operation="op",outcome="permanent"} 0
retry_calls_total{operation="op",outcome="refused"} 5
retry_calls_total{operation="op",outcome="success"} 0
retry_calls_total{operation="op",outcome="unknown"} 0
retry_calls_total{operation="op",outcome="handed-off"} 0
# HELP retry_attempts_total Attempts made, first attempts included.
# TYPE retry_attempts_total counter
retry_attempts_total{operation="op"} 4
# HELP retry_refusals_total Refused calls, by who refused them: a retry budget, a circuit breaker, a concurrency limit, a rate limit or a pause.
# TYPE retry_refusals_total counter
retry_refusals_total{operation="op",refused_by="breaker"} 1
retry_refusals_total{operation="op",refused_by="budget"} 1
retry_refusals_total{operation="op",refused_by="limit"} 1
retry_refusals_total{operation="op",refused_by="pause"} 1
retry_refusals_total{operation="op",refused_by="rate"} 1
`
	assert.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(want), "retry_calls_total", "retry_attempts_total", "retry_refusals_total"))
}

// TestObserver_refusedBy: a refusal counts once, by the first of budget,
// breaker, limit, rate and pause its error matches; one that matches none,
// and the errors of other outcomes, count in no refusal series.
func TestObserver_refusedBy(t *testing.T) {
	t.Parallel()
	obs, _ := newObserver(t, retryprom.Options{})
	for _, err := range []error{
		fmt.Errorf("limit of payments-api: %w", overload.ErrLimitExceeded),
		errors.Join(overload.ErrLimitExceeded, overload.ErrCircuitOpen),
		errors.Join(overload.ErrLimitExceeded, overload.ErrBudgetExhausted),
		errors.Join(overload.ErrRateLimited, overload.ErrPaused),
		fmt.Errorf("rate of payments-api: %w", overload.ErrRateLimited),
		retry.After(overload.ErrPaused, time.Second),
		errors.New("a limit of one's own"),
	} {
		obs.OnDone(t.Context(), retry.Done{Name: "op", Outcome: retry.OutcomeRefused, Attempts: 1, Err: err})
	}
	obs.OnDone(t.Context(), retry.Done{Name: "op", Outcome: retry.OutcomeExhausted, Attempts: 1, Err: overload.ErrLimitExceeded})
	obs.OnDone(t.Context(), retry.Done{Name: "op", Outcome: retry.OutcomeDeadline, Attempts: 1, Err: overload.ErrPaused})
	want := `
# HELP retry_refusals_total Refused calls, by who refused them: a retry budget, a circuit breaker, a concurrency limit, a rate limit or a pause.
# TYPE retry_refusals_total counter
retry_refusals_total{operation="op",refused_by="breaker"} 1
retry_refusals_total{operation="op",refused_by="budget"} 1
retry_refusals_total{operation="op",refused_by="limit"} 1
retry_refusals_total{operation="op",refused_by="pause"} 1
retry_refusals_total{operation="op",refused_by="rate"} 2
`
	assert.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(want), "retry_refusals_total"))
}
