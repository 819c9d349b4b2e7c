package redislimit_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/redislimit"
	"github.com/steadfast-go/retry/storetest"
)

var (
	first = overload.Attempt{Kind: overload.FirstAttempt}
	again = overload.Attempt{Kind: overload.RetryAttempt}
	hedge = overload.Attempt{Kind: overload.HedgeAttempt}
)

// newRate is a Rate on c with o, under a fresh Key unless o has one.
func newRate(tb testing.TB, c *redis.Client, o redislimit.RateOptions) *redislimit.Rate {
	tb.Helper()
	if o.Key == "" {
		o.Key = testKey(tb, c)
	}
	r, err := redislimit.NewRate(c, &o)
	require.NoError(tb, err)
	return r
}

// admitN admits n attempts of kind a and returns how many were admitted,
// failing the test on an error that is no refusal.
func admitN(t *testing.T, r *redislimit.Rate, ctx context.Context, a overload.Attempt, n int) int {
	t.Helper()
	admitted := 0
	for range n {
		err := r.Admit(ctx, a)
		if err == nil {
			admitted++
		} else {
			require.ErrorIs(t, err, overload.ErrRateLimited)
		}
	}
	return admitted
}

// The burst goes at once; the next attempt is refused with a
// RateLimitedError that says when there is room again.
func TestRate_burstThenRefuses(t *testing.T) {
	r := newRate(t, newClient(t), redislimit.RateOptions{PerSecond: 1, Burst: 5})
	ctx := t.Context()
	for i := range 5 {
		require.NoError(t, r.Admit(ctx, first), "attempt %d of the burst", i)
	}
	err := r.Admit(ctx, first)
	require.ErrorIs(t, err, overload.ErrRateLimited)
	assert.NotErrorIs(t, err, redislimit.ErrUnavailable)
	var limited *redislimit.RateLimitedError
	require.ErrorAs(t, err, &limited)
	assert.Greater(t, limited.RetryAfter, 900*time.Millisecond, "one attempt a second, the burst spent just now")
	assert.LessOrEqual(t, limited.RetryAfter, time.Second)
	assert.Equal(t, overload.RefusedByRate, overload.RefuserOf(err))
	assert.Equal(t, redislimit.Stats{Refused: 1}, r.Stats())
}

// A rate that is not a whole number per second works as one attempt per
// period.
func TestRate_fractionalPerSecond(t *testing.T) {
	r := newRate(t, newClient(t), redislimit.RateOptions{PerSecond: 0.5, Burst: 1})
	ctx := t.Context()
	require.NoError(t, r.Admit(ctx, first))
	var limited *redislimit.RateLimitedError
	require.ErrorAs(t, r.Admit(ctx, first), &limited)
	assert.Greater(t, limited.RetryAfter, 1900*time.Millisecond)
	assert.LessOrEqual(t, limited.RetryAfter, 2*time.Second)
}

// Two Rates with the same Key, each with its own connection as two
// processes have, share one limit.
func TestRate_sharedByProcesses(t *testing.T) {
	c := newClient(t)
	key := testKey(t, c)
	o := redislimit.RateOptions{Key: key, PerSecond: 1, Burst: 3}
	a, b := newRate(t, c, o), newRate(t, clientAt(t, c.Options().Addr), o)
	ctx := t.Context()
	require.NoError(t, a.Admit(ctx, first))
	require.NoError(t, b.Admit(ctx, first))
	require.NoError(t, a.Admit(ctx, first))
	require.ErrorIs(t, b.Admit(ctx, first), overload.ErrRateLimited)
	require.ErrorIs(t, a.Admit(ctx, first), overload.ErrRateLimited)
}

// Partitioned, each partition has its limit under its own Redis key, and
// no refusal names it; unpartitioned, the partition changes nothing.
func TestRate_partitions(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	tenantA := overload.WithPartition(ctx, "tenant-a")
	tenantB := overload.WithPartition(ctx, "tenant-b")

	key := testKey(t, c)
	r := newRate(t, c, redislimit.RateOptions{Key: key, PerSecond: 1, Burst: 2, Partitioned: true})
	assert.Equal(t, 2, admitN(t, r, tenantA, first, 3))
	err := r.Admit(tenantA, first)
	require.ErrorIs(t, err, overload.ErrRateLimited)
	assert.NotContains(t, err.Error(), "tenant")
	assert.Equal(t, 2, admitN(t, r, tenantB, first, 3), "tenant-b has its own limit")
	assert.Equal(t, 2, admitN(t, r, ctx, first, 3), "so has the partition \"\"")
	n, err := c.Exists(ctx, "rate:"+key+":tenant-a", "rate:"+key+":tenant-b", "rate:"+key+":").Result()
	require.NoError(t, err)
	assert.EqualValues(t, 3, n, "a Redis key per partition")

	whole := newRate(t, c, redislimit.RateOptions{PerSecond: 1, Burst: 2})
	assert.Equal(t, 1, admitN(t, whole, tenantA, first, 1))
	assert.Equal(t, 1, admitN(t, whole, tenantB, first, 2), "unpartitioned, tenant-b shares tenant-a's limit")
}

// RetriesPerSecond caps retries and hedges, this process's share of it,
// while first attempts keep the rest of the limit; under the cap,
// retries count against the limit too.
func TestRate_retriesCap(t *testing.T) {
	c := newClient(t)
	ctx := t.Context()
	r := newRate(t, c, redislimit.RateOptions{PerSecond: 1, Burst: 10, RetriesPerSecond: 1, RetryBurst: 6, FleetSize: 2})
	assert.Equal(t, 2, admitN(t, r, ctx, again, 2))
	assert.Equal(t, 1, admitN(t, r, ctx, hedge, 1))
	err := r.Admit(ctx, again)
	require.ErrorIs(t, err, overload.ErrRateLimited, "the share is 3 retries at once: 6 / FleetSize")
	assert.NotErrorIs(t, err, redislimit.ErrUnavailable)
	assert.Equal(t, 7, admitN(t, r, ctx, first, 8), "first attempts get what the 3 retries left of the burst")
	assert.Equal(t, redislimit.Stats{Refused: 2}, r.Stats())
}

// Each admission is one round trip, EVALSHA, counted by a hook on the
// client once the script is cached and the connection made.
func TestRate_oneRoundTrip(t *testing.T) {
	c := newClient(t)
	var commands atomic.Int64
	var names []string
	c.AddHook(countHook{n: &commands, names: &names})
	r := newRate(t, c, redislimit.RateOptions{PerSecond: 1, Burst: 20, Partitioned: true})
	ctx := overload.WithPartition(t.Context(), "tenant")
	require.NoError(t, r.Admit(ctx, first)) // loads the script when the server has not cached it
	commands.Store(0)
	names = nil
	const n = 50
	admitted := admitN(t, r, ctx, first, n)
	assert.Equal(t, 19, admitted, "the rest of the burst")
	assert.EqualValues(t, n, commands.Load(), "round trips for %d admissions", n)
	for _, name := range names {
		assert.Equal(t, "evalsha", name)
	}
}

// countHook counts the commands and pipelines that a client sends, and
// names the commands.
type countHook struct {
	n     *atomic.Int64
	names *[]string // not for concurrent use
}

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		if h.names != nil {
			*h.names = append(*h.names, cmd.Name())
		}
		return next(ctx, cmd)
	}
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// unreachable is a client of a port where no server listens.
func unreachable(t *testing.T) *redis.Client {
	return clientAt(t, "127.0.0.1:1")
}

// With Redis unreachable, a Rate fails open by default: the Fallback,
// this process's share of the limit, decides; no Redis error is a
// refusal of its own, and Redis is left alone until Recheck.
func TestRate_unreachableFailsOpen(t *testing.T) {
	r, err := redislimit.NewRate(unreachable(t), &redislimit.RateOptions{Key: "down", PerSecond: 10, Burst: 4, FleetSize: 2})
	require.NoError(t, err)
	ctx := t.Context()
	start := time.Now()
	require.NoError(t, r.Admit(ctx, first))
	assert.Less(t, time.Since(start), redislimit.DefaultTimeout+250*time.Millisecond, "the round trip is bounded by Timeout")
	require.NoError(t, r.Admit(ctx, first), "the share's burst is 2: 4 / FleetSize")
	err = r.Admit(ctx, first)
	require.ErrorIs(t, err, overload.ErrRateLimited)
	require.ErrorIs(t, err, redislimit.ErrUnavailable)
	var limited *redislimit.RateLimitedError
	assert.NotErrorAs(t, err, &limited, "Redis did not refuse it")
	assert.Equal(t, redislimit.Stats{Refused: 1, Fallbacks: 3, Errors: 1}, r.Stats(), "one round trip tried, then Redis left alone")
}

// A Fallback given in the options decides instead of the default share.
func TestRate_unreachableOwnFallback(t *testing.T) {
	fallback, err := overload.NewRate(overload.RateOptions{PerSecond: 1, Burst: 3})
	require.NoError(t, err)
	r, err := redislimit.NewRate(unreachable(t), &redislimit.RateOptions{Key: "down", PerSecond: 1000, Fallback: fallback})
	require.NoError(t, err)
	assert.Equal(t, 3, admitN(t, r, t.Context(), first, 5))
	assert.EqualValues(t, 2, fallback.Refused())
}

// FailClosed refuses every attempt while Redis is unreachable, with an
// error that says so.
func TestRate_unreachableFailsClosed(t *testing.T) {
	r, err := redislimit.NewRate(unreachable(t), &redislimit.RateOptions{Key: "down", PerSecond: 1000, FailClosed: true})
	require.NoError(t, err)
	for range 3 {
		err := r.Admit(t.Context(), first)
		require.ErrorIs(t, err, overload.ErrRateLimited)
		require.ErrorIs(t, err, redislimit.ErrUnavailable)
	}
	assert.Equal(t, redislimit.Stats{Refused: 3, Fallbacks: 3, Errors: 1}, r.Stats())
}

// A Redis that accepts connections and never answers holds an admission
// for Timeout, not go-redis's ReadTimeout; once it answers again, one
// admission after Recheck finds it, and the Rate goes back to Redis.
func TestRate_hangingRedisThenBack(t *testing.T) {
	addr := needRedis(t)
	proxy := storetest.NewFaultProxy(t, addr, storetest.FaultProxyOptions{})
	c := clientAt(t, proxy.Addr())
	const timeout, recheck = 20 * time.Millisecond, 50 * time.Millisecond
	r := newRate(t, c, redislimit.RateOptions{Key: testKey(t, newClient(t)), PerSecond: 1000, Timeout: timeout, Recheck: recheck})
	ctx := t.Context()

	proxy.Pause(true)
	start := time.Now()
	require.NoError(t, r.Admit(ctx, first), "fail open")
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, timeout)
	assert.Less(t, took, timeout+250*time.Millisecond, "bounded by Timeout, not the client's ReadTimeout (3s)")
	assert.Equal(t, redislimit.Stats{Fallbacks: 1, Errors: 1}, r.Stats())

	proxy.Pause(false)
	proxy.CutAll()
	eventually(t, 5*time.Second, "admissions back on Redis", func() bool {
		before := r.Stats().Fallbacks
		require.NoError(t, r.Admit(ctx, first))
		return r.Stats().Fallbacks == before
	})
	s := r.Stats()
	assert.Greater(t, s.Fallbacks, uint64(1), "admissions during Recheck used the Fallback")
	assert.LessOrEqual(t, s.Errors, s.Fallbacks)
}

// An admission whose call's context has ended says nothing of Redis: it
// is decided by the Fallback, but Redis is not left alone for it.
func TestRate_callEndedIsNoRedisError(t *testing.T) {
	r := newRate(t, newClient(t), redislimit.RateOptions{PerSecond: 1000})
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	require.NoError(t, r.Admit(ended, first))
	assert.Equal(t, redislimit.Stats{Fallbacks: 1}, r.Stats())
	require.NoError(t, r.Admit(t.Context(), first))
	assert.Equal(t, redislimit.Stats{Fallbacks: 1}, r.Stats(), "the next admission asked Redis")
}

// Invalid options and clients give an error wrapping
// retry.ErrInvalidOption that names the problem, never a panic.
func TestNewRate_invalid(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	noCtxTimeouts := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = noCtxTimeouts.Close() })
	fallback, err := overload.NewRate(overload.RateOptions{PerSecond: 1})
	require.NoError(t, err)
	ok := redislimit.RateOptions{Key: "payments", PerSecond: 100}
	with := func(f func(*redislimit.RateOptions)) *redislimit.RateOptions {
		o := ok
		f(&o)
		return &o
	}
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		opts   *redislimit.RateOptions
		want   string
	}{
		{"nil client", nil, &ok, "client is nil"},
		{"typed nil client", (*redis.Client)(nil), &ok, "client is nil"},
		{"typed nil cluster client", (*redis.ClusterClient)(nil), &ok, "client is nil"},
		{"no context timeouts", noCtxTimeouts, &ok, "ContextTimeoutEnabled"},
		{"nil options", c, nil, "options are nil"},
		{"empty key", c, with(func(o *redislimit.RateOptions) { o.Key = "" }), "Key is empty"},
		{"hash tag", c, with(func(o *redislimit.RateOptions) { o.Key = "{payments}" }), "Key contains '{' or '}'"},
		{"zero rate", c, with(func(o *redislimit.RateOptions) { o.PerSecond = 0 }), "PerSecond 0"},
		{"negative rate", c, with(func(o *redislimit.RateOptions) { o.PerSecond = -1 }), "PerSecond -1"},
		{"NaN rate", c, with(func(o *redislimit.RateOptions) { o.PerSecond = math.NaN() }), "PerSecond NaN"},
		{"infinite rate", c, with(func(o *redislimit.RateOptions) { o.PerSecond = math.Inf(1) }), "PerSecond +Inf"},
		{"rate too high", c, with(func(o *redislimit.RateOptions) { o.PerSecond = 2e6 }), "PerSecond 2e+06"},
		{"negative burst", c, with(func(o *redislimit.RateOptions) { o.Burst = -1 }), "Burst -1"},
		{"retries above the rate", c, with(func(o *redislimit.RateOptions) { o.RetriesPerSecond = 101 }), "RetriesPerSecond 101"},
		{"negative retry burst", c, with(func(o *redislimit.RateOptions) { o.RetriesPerSecond = 1; o.RetryBurst = -1 }), "RetryBurst -1"},
		{"negative partitions", c, with(func(o *redislimit.RateOptions) { o.MaxPartitions = -1 }), "MaxPartitions -1"},
		{"negative fleet", c, with(func(o *redislimit.RateOptions) { o.FleetSize = -1 }), "FleetSize -1"},
		{"fallback and fail closed", c, with(func(o *redislimit.RateOptions) { o.Fallback = fallback; o.FailClosed = true }), "Fallback is set with FailClosed"},
		{"timeout in seconds", c, with(func(o *redislimit.RateOptions) { o.Timeout = 50 }), "Timeout 50ns is below 1ms"},
		{"negative timeout", c, with(func(o *redislimit.RateOptions) { o.Timeout = -time.Second }), "Timeout -1s"},
		{"recheck too short", c, with(func(o *redislimit.RateOptions) { o.Recheck = time.Microsecond }), "Recheck 1µs is below 1ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := redislimit.NewRate(tc.client, tc.opts)
			require.ErrorIs(t, err, retry.ErrInvalidOption)
			assert.Nil(t, r)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.Contains(err.Error(), "redislimit:"), "%q names the package", err)
			assert.False(t, errors.Is(err, overload.ErrRateLimited))
		})
	}
	r, err := redislimit.NewRate(c, &ok)
	require.NoError(t, err, "the options that the cases change are valid")
	assert.NotNil(t, r)
}
