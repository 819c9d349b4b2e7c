package retryslog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrymetrics/metricstest"
	"github.com/steadfast-go/retry/retryslog"
)

// logged runs a call through a slog observer writing JSON at handlerLevel
// and returns the records, without their time.
func logged(t *testing.T, handlerLevel slog.Level, opts *retryslog.Options, fn func(context.Context) error, extra ...retry.Option) []map[string]any {
	t.Helper()
	return loggedIn(t, handlerLevel, opts, fn, func(t *testing.T) (context.Context, []retry.Option) { return t.Context(), extra })
}

// loggedIn is logged with the call's context and extra options made by
// setup in the test's bubble, for what reads the bubble's clock (a rate,
// a pause, a deadline).
func loggedIn(t *testing.T, handlerLevel slog.Level, opts *retryslog.Options, fn func(context.Context) error, setup func(*testing.T) (context.Context, []retry.Option)) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	h := slog.NewJSONHandler(&buf, &slog.HandlerOptions{
		Level: handlerLevel,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	})
	synctest.Test(t, func(t *testing.T) {
		ctx, extra := setup(t)
		opts := append([]retry.Option{
			retry.WithName("charge-card"),
			retry.WithObserver(retryslog.New(slog.New(h), opts)),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter),
		}, extra...)
		_ = retry.Do(ctx, fn, opts...)
	})
	var recs []map[string]any
	for line := range strings.Lines(buf.String()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		recs = append(recs, m)
	}
	return recs
}

func TestSlogObserver_retriesThenSuccess(t *testing.T) {
	t.Parallel()
	recs := logged(t, slog.LevelDebug, nil, metricstest.Failing(3, nil))
	want := []map[string]any{
		{"level": "INFO", "msg": "retry: attempt failed, retrying", "operation": "charge-card", "attempt": 1.0, "delay": 1e9, "error": "flaky"},
		{"level": "INFO", "msg": "retry: attempt failed, retrying", "operation": "charge-card", "attempt": 2.0, "delay": 1e9, "error": "flaky"},
		{"level": "INFO", "msg": "retry: succeeded", "operation": "charge-card", "outcome": "success", "attempts": 3.0, "elapsed": 2e9},
	}
	assert.Equal(t, want, recs)
}

func TestSlogObserver_firstTrySuccessIsSilent(t *testing.T) {
	t.Parallel()
	assert.Empty(t, logged(t, slog.LevelDebug, nil, metricstest.Failing(1, nil)))
}

// smallBudget refuses the second retry of a failing call.
func smallBudget(t *testing.T) *overload.TokenBucket {
	t.Helper()
	b, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 4})
	require.NoError(t, err)
	return b
}

func TestSlogObserver_levels(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		fn      func(context.Context) error
		extra   []retry.Option
		level   string
		outcome string
	}{
		{name: "permanent", fn: metricstest.Failing(2, retry.Permanent(metricstest.ErrFlaky)), level: "WARN", outcome: "permanent"},
		{name: "exhausted", fn: metricstest.Failing(9, nil), level: "ERROR", outcome: "exhausted"},
		{name: "max_elapsed", fn: metricstest.Failing(9, nil), extra: []retry.Option{retry.WithMaxElapsed(1500 * time.Millisecond)}, level: "ERROR", outcome: "max-elapsed"},
		{name: "refused", fn: metricstest.Failing(9, nil), extra: []retry.Option{retry.WithOverload(&retry.OverloadOptions{Budget: smallBudget(t)})}, level: "ERROR", outcome: "refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			recs := logged(t, slog.LevelWarn, nil, tc.fn, tc.extra...)
			require.Len(t, recs, 1, "retries are below Warn")
			assert.Equal(t, tc.level, recs[0]["level"])
			assert.Equal(t, "retry: gave up", recs[0]["msg"])
			assert.Equal(t, tc.outcome, recs[0]["outcome"])
			assert.Contains(t, recs[0]["error"], "flaky")
		})
	}
}

// openBreaker refuses every attempt.
type openBreaker struct{}

func (openBreaker) Allow() (func(error), error) { return nil, overload.ErrCircuitOpen }

// ownLimit refuses every attempt with an error of its own.
type ownLimit struct{}

func (ownLimit) Acquire(context.Context, overload.Attempt) error { return errors.New("no room") }
func (ownLimit) Release(overload.Result, time.Duration)          {}

// fullLimit returns a fixed limit of 1 whose permit the test holds.
func fullLimit(t *testing.T) *overload.Adaptive {
	t.Helper()
	l, err := overload.NewAdaptive(overload.AdaptiveOptions{Min: 1, Max: 1})
	require.NoError(t, err)
	require.NoError(t, l.Acquire(t.Context(), overload.Attempt{}))
	t.Cleanup(func() { l.Release(overload.Dropped, 0) })
	return l
}

// secretPartition is a partition key that no record may show.
const secretPartition = "tenant-4711"

// slowRate admits one attempt per 10s: a call's retry 1s after its first
// attempt is refused.
func slowRate(t *testing.T) (context.Context, *retry.OverloadOptions) {
	r, err := overload.NewRate(overload.RateOptions{PerSecond: 0.1})
	require.NoError(t, err)
	return t.Context(), &retry.OverloadOptions{Rate: r}
}

// pausedPastTheDeadline is a 10s pause of the partition secretPartition,
// as after a server's Retry-After, and a call of it with a 1s deadline:
// refused before its first attempt.
func pausedPastTheDeadline(t *testing.T) (context.Context, *retry.OverloadOptions) {
	p, err := overload.NewPause(overload.PauseOptions{Partitioned: true})
	require.NoError(t, err)
	ctx := overload.WithPartition(t.Context(), secretPartition)
	p.Extend(ctx, 10*time.Second)
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	t.Cleanup(cancel)
	return ctx, &retry.OverloadOptions{Pause: p}
}

// A refused call's record says who refused it when its error matches
// one of the overload package's refusals; no other record does.
func TestSlogObserver_refusedBy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		fn    func(context.Context) error
		guard *retry.OverloadOptions
		// inBubble, if set, makes the call's context and guard in the
		// test's bubble instead of guard.
		inBubble func(*testing.T) (context.Context, *retry.OverloadOptions)
		outcome  string
		by       any // nil: no refused_by
	}{
		{name: "budget", fn: metricstest.Failing(9, nil), guard: &retry.OverloadOptions{Budget: smallBudget(t)}, outcome: "refused", by: "budget"},
		{name: "breaker", fn: metricstest.Failing(1, nil), guard: &retry.OverloadOptions{Breaker: openBreaker{}}, outcome: "refused", by: "breaker"},
		{name: "limit", fn: metricstest.Failing(1, nil), guard: &retry.OverloadOptions{Limit: fullLimit(t)}, outcome: "refused", by: "limit"},
		{name: "limit_of_ones_own", fn: metricstest.Failing(1, nil), guard: &retry.OverloadOptions{Limit: ownLimit{}}, outcome: "refused"},
		{name: "rate", fn: metricstest.Failing(9, nil), inBubble: slowRate, outcome: "refused", by: "rate"},
		{name: "pause", fn: metricstest.Failing(1, nil), inBubble: pausedPastTheDeadline, outcome: "refused", by: "pause"},
		{name: "not_refused", fn: metricstest.Failing(9, overload.ErrLimitExceeded), guard: &retry.OverloadOptions{NoBudget: true}, outcome: "exhausted"},
		{name: "not_refused_paused", fn: metricstest.Failing(9, overload.ErrPaused), guard: &retry.OverloadOptions{NoBudget: true}, outcome: "exhausted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			setup := func(t *testing.T) (context.Context, []retry.Option) {
				ctx, guard := t.Context(), tc.guard
				if tc.inBubble != nil {
					ctx, guard = tc.inBubble(t)
				}
				return ctx, []retry.Option{retry.WithMaxAttempts(9), retry.WithOverload(guard)}
			}
			recs := loggedIn(t, slog.LevelError, nil, tc.fn, setup)
			require.Len(t, recs, 1)
			assert.Equal(t, "ERROR", recs[0]["level"])
			assert.Equal(t, "retry: gave up", recs[0]["msg"])
			assert.Equal(t, tc.outcome, recs[0]["outcome"])
			assert.Equal(t, tc.by, recs[0]["refused_by"])
			assert.NotContains(t, fmt.Sprint(recs), secretPartition, "the partition key is not logged")
		})
	}
}

func TestSlogObserver_contextEnds(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	obs := retryslog.New(log, &retryslog.Options{RetryLevel: slog.LevelDebug})
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		err := retry.Do(ctx, metricstest.Failing(9, nil), retry.WithObserver(obs),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter))
		require.ErrorIs(t, err, context.DeadlineExceeded)

		ctx, cancel = context.WithCancel(t.Context())
		time.AfterFunc(500*time.Millisecond, cancel)
		err = retry.Do(ctx, metricstest.Failing(9, nil), retry.WithObserver(obs),
			retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter))
		require.ErrorIs(t, err, context.Canceled)
	})
	out := buf.String()
	assert.Contains(t, out, `level=WARN msg="retry: gave up" operation="" outcome=deadline attempts=2 elapsed=1s`)
	assert.Contains(t, out, `level=DEBUG msg="retry: cancelled" operation="" outcome=canceled attempts=1 elapsed=500ms`)
}

func TestSlogObserver_debugRetriesStayOut(t *testing.T) {
	t.Parallel()
	var called atomic.Int32
	opts := &retryslog.Options{
		RetryLevel: slog.LevelDebug,
		Attrs: func(context.Context) []slog.Attr {
			called.Add(1)
			return []slog.Attr{slog.String("request_id", "r-1")}
		},
	}
	recs := logged(t, slog.LevelInfo, opts, metricstest.Failing(9, nil))
	require.Len(t, recs, 1)
	assert.Equal(t, "ERROR", recs[0]["level"])
	assert.Equal(t, "r-1", recs[0]["request_id"])
	assert.Equal(t, int32(1), called.Load(), "Attrs is called only for records written")
}

func TestSlogObserver_noPayloadUnlessOptedIn(t *testing.T) {
	t.Parallel()
	recs := logged(t, slog.LevelDebug, nil, metricstest.Failing(9, nil), retry.WithPayload([]byte("card=4242424242424242")))
	require.Len(t, recs, 3)
	for _, r := range recs {
		b, err := json.Marshal(r)
		require.NoError(t, err)
		assert.NotContains(t, string(b), "4242")
	}
}

func TestSlogObserver_deadLetterFailedIsError(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	obs := retryslog.New(slog.New(slog.NewTextHandler(&buf, nil)), nil)
	obs.OnDone(t.Context(), retry.Done{Name: "x", Outcome: retry.OutcomePermanent, Attempts: 1, DeadLetterFailed: true})
	obs.OnDone(t.Context(), retry.Done{Name: "y", Outcome: retry.OutcomePermanent, Attempts: 1, DeadLettered: true})
	out := buf.String()
	assert.Contains(t, out, `level=ERROR msg="retry: gave up" operation=x outcome=permanent attempts=1 elapsed=0s dead_letter=failed`)
	assert.Contains(t, out, `level=WARN msg="retry: gave up" operation=y outcome=permanent attempts=1 elapsed=0s dead_letter=recorded`)
}

// handOffQueue takes every wait handed to it.
type handOffQueue struct{}

func (handOffQueue) HandOff(context.Context, retry.Waiting) (string, error) { return "job-1", nil }

// A handed-off call is no failure: it is logged at Info, as a hand-off.
func TestSlogObserver_handedOffIsInfo(t *testing.T) {
	t.Parallel()
	recs := logged(t, slog.LevelDebug, nil, metricstest.Failing(9, nil),
		retry.WithHandOff(handOffQueue{}, &retry.HandOffOptions{Threshold: time.Second}))
	require.Len(t, recs, 1, "no retry is announced for the wait handed off")
	assert.Equal(t, "INFO", recs[0]["level"])
	assert.Equal(t, "retry: handed off", recs[0]["msg"])
	assert.Equal(t, "handed-off", recs[0]["outcome"])
	assert.Contains(t, recs[0]["error"], "handed off as job-1")
}
