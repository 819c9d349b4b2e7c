package retrymetrics_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrymetrics"
	"github.com/steadfast-go/retry/retrymetrics/metricstest"
)

func TestGaugeDelta_rule(t *testing.T) {
	t.Parallel()
	type d = retrymetrics.GaugeDelta
	cases := []struct {
		event string
		got   d
		want  d
	}{
		{"first attempt", retrymetrics.OnAttemptStart(1, 0), d{InFlight: 1}},
		{"later attempt after a zero-delay retry", retrymetrics.OnAttemptStart(2, 0), d{}},
		{"later attempt after a wait", retrymetrics.OnAttemptStart(3, time.Second), d{Waiting: -1}},
		{"later attempt after a 1ns wait", retrymetrics.OnAttemptStart(2, time.Nanosecond), d{Waiting: -1}},
		{"retry with a delay", retrymetrics.OnRetry(time.Second), d{Waiting: 1}},
		{"retry with a 1ns delay", retrymetrics.OnRetry(time.Nanosecond), d{Waiting: 1}},
		{"retry without delay", retrymetrics.OnRetry(0), d{}},
		{"done after attempts", retrymetrics.OnDone(3, false), d{InFlight: -1}},
		{"done while waiting", retrymetrics.OnDone(1, true), d{InFlight: -1, Waiting: -1}},
		{"done before the first attempt", retrymetrics.OnDone(0, false), d{}},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, tc.got, tc.event)
	}
}

// TestGaugeDelta_calls applies the rule to the events of real calls that
// end in every way a wait can, and before their first attempt: both
// gauges come back to 0.
func TestGaugeDelta_calls(t *testing.T) {
	t.Parallel()
	obs := &gauges{} // from the example
	metricstest.Gauges(t, obs,
		func() float64 { return float64(obs.inFlight.Load()) },
		func() float64 { return float64(obs.waiting.Load()) })
	calls := []struct {
		name string
		ctx  func(context.Context) context.Context
		opts []retry.Option
	}{
		{"no attempt", func(ctx context.Context) context.Context {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return ctx
		}, nil},
		{"zero-delay retries", nil, []retry.Option{retry.WithBackoff(retry.Constant(0))}},
		{"stops before a wait", nil, []retry.Option{retry.WithBackoff(retry.Constant(time.Second)), retry.WithMaxElapsed(1500 * time.Millisecond)}},
	}
	for _, c := range calls {
		synctest.Test(t, func(t *testing.T) {
			ctx := t.Context()
			if c.ctx != nil {
				ctx = c.ctx(ctx)
			}
			_ = retry.Do(ctx, metricstest.Failing(9, nil), append(c.opts, retry.WithObserver(obs), retry.WithJitter(retry.NoJitter))...)
		})
		assert.Zero(t, obs.inFlight.Load(), c.name)
		assert.Zero(t, obs.waiting.Load(), c.name)
	}
}
