package overload_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
)

func TestNewTokenBucket_refusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    overload.TokenBucketOptions
		want string
	}{
		{"max_too_big", overload.TokenBucketOptions{MaxTokens: 1001}, "MaxTokens 1001"},
		{"max_negative", overload.TokenBucketOptions{MaxTokens: -1}, "MaxTokens -1"},
		{"ratio_negative", overload.TokenBucketOptions{TokenRatio: -0.1}, "TokenRatio -0.1"},
		{"ratio_tiny", overload.TokenBucketOptions{TokenRatio: 0.0001}, "0.001"},
		{"ratio_above_max", overload.TokenBucketOptions{MaxTokens: 10, TokenRatio: 11}, "TokenRatio 11"},
		{"throttle_cost_above_max", overload.TokenBucketOptions{MaxTokens: 10, ThrottleCost: 11}, "ThrottleCost 11"},
		{"waiting_negative", overload.TokenBucketOptions{MaxWaiting: -1}, "MaxWaiting -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := overload.NewTokenBucket(tc.o)
			require.Error(t, err)
			assert.Nil(t, b)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestTokenBucket_followsGRPCThrottling(t *testing.T) {
	// gRFC A6's example: 10 tokens, 0.1 back per success.
	b, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 10, TokenRatio: 0.1})
	require.NoError(t, err)
	assert.Equal(t, 10.0, b.Tokens(), "starts full")
	for i := range 4 {
		b.Attempted(1, true, false)
		require.NoError(t, b.Retry(0), "failure %d leaves %v tokens, above half", i+1, b.Tokens())
	}
	b.Attempted(1, true, false) // 5 tokens: not above half
	assert.Equal(t, 5.0, b.Tokens())
	err = b.Retry(0)
	require.ErrorIs(t, err, overload.ErrBudgetExhausted)
	b.Attempted(1, false, false) // 5.1
	assert.InDelta(t, 5.1, b.Tokens(), 1e-9)
	require.NoError(t, b.Retry(0), "one success opens it again")
	for range 100 {
		b.Attempted(1, false, false)
	}
	assert.Equal(t, 10.0, b.Tokens(), "never above MaxTokens")
	for range 20 {
		b.Attempted(2, true, false)
	}
	assert.Equal(t, 0.0, b.Tokens(), "never below 0")
}

func TestTokenBucket_throttleCost(t *testing.T) {
	b, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 10, ThrottleCost: 3})
	require.NoError(t, err)
	b.Attempted(1, true, true)
	assert.Equal(t, 7.0, b.Tokens())
	b.Attempted(1, true, false)
	assert.Equal(t, 6.0, b.Tokens())
}

func TestTokenBucket_defaults(t *testing.T) {
	b, err := overload.NewTokenBucket(overload.TokenBucketOptions{})
	require.NoError(t, err)
	assert.Equal(t, 100.0, b.Tokens())
	n := 0
	for b.Retry(0) == nil {
		b.Attempted(1, true, false)
		n++
	}
	assert.Equal(t, 50, n, "failures the default bucket retries before it closes")
}

// TestTokenBucket_countsEveryToken shares one bucket among 64 goroutines
// and checks the balance to the thousandth: no update is lost.
func TestTokenBucket_countsEveryToken(t *testing.T) {
	b, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 1000, TokenRatio: 0.1})
	require.NoError(t, err)
	const g = 64
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for range 7 { // 448 in all: never reaches 0
				b.Attempted(1, true, false)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 552.0, b.Tokens())
	for range g {
		wg.Go(func() {
			for range 50 { // 64 x 50 x 0.1 = 320: never reaches the top
				b.Attempted(1, false, false)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 872.0, b.Tokens())
	// Concurrent failures and successes, both clamps out of reach: the
	// balance is exact whatever the interleaving.
	// 32 x 20 failures take 640, 32 x 40 successes put back 128: the
	// bucket stays within [232, 1000].
	for i := range g {
		wg.Go(func() {
			for range 20 + 20*(i%2) {
				b.Attempted(1, i%2 == 0, false)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 872.0-640+128, b.Tokens())
}

func TestTokenBucket_maxWaiting(t *testing.T) {
	b, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxWaiting: 10})
	require.NoError(t, err)
	var granted, refused atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			if err := b.Retry(1); err != nil {
				assert.ErrorIs(t, err, overload.ErrBudgetExhausted)
				assert.Contains(t, err.Error(), "10 calls are already waiting")
				refused.Add(1)
				return
			}
			granted.Add(1)
		})
	}
	wg.Wait()
	assert.Equal(t, int64(10), granted.Load())
	assert.Equal(t, int64(54), refused.Load())
	require.NoError(t, b.Retry(0), "a zero wait parks nothing")
	b.Waited()
	require.NoError(t, b.Retry(1), "a slot given back is free again")
}

// TestTokenBucket_zeroValueSaysWhy: the zero TokenBucket, an empty bucket
// of size 0, panics in none of its methods and refuses every retry with
// an error that says it must be made with NewTokenBucket, directly and
// through retry.Do. The old code refused it by accident, as "at or below
// half full", which hid the mistake.
func TestTokenBucket_zeroValueSaysWhy(t *testing.T) {
	var b overload.TokenBucket
	assert.NotPanics(t, func() {
		b.Attempted(1, false, false)
		b.Attempted(2, true, false)
		b.Attempted(3, true, true)
		assert.True(t, b.Full(), "a bucket of size 0 is full")
		assert.Zero(t, b.Tokens())
	})
	for _, wait := range []time.Duration{0, time.Second} {
		err := b.Retry(wait)
		require.ErrorIs(t, err, overload.ErrBudgetExhausted)
		assert.Contains(t, err.Error(), "a TokenBucket must be made with NewTokenBucket")
	}
	assert.NotPanics(t, b.Waited)

	boom := errors.New("boom")
	calls := 0
	err := retry.Do(context.Background(), func(context.Context) error { calls++; return boom },
		retry.WithOverload(&retry.OverloadOptions{Budget: &overload.TokenBucket{}}), retry.WithBackoff(retry.Constant(0)))
	assert.Equal(t, 1, calls)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, retry.OutcomeRefused, re.Outcome)
	assert.ErrorIs(t, err, overload.ErrBudgetExhausted)
	assert.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "a TokenBucket must be made with NewTokenBucket")
}

// TestTokenBucket_A6Sequences pins the bucket to gRFC A6's rules, step by
// step ("Retry Throttling"): token_count starts at maxTokens; "every
// failed RPC will decrement the token_count by 1", "every successful RPC
// will increment the token_count by tokenRatio", never above maxTokens;
// retries are throttled while token_count <= maxTokens/2; only retryable
// failures count as failures. Events: f a retryable failure, s a
// success. Attempts that A6 does not count (a non-retryable status, the
// caller's deadline) are not told to the bucket at all: see
// TestBudget_onlySuccessRefunds in package retry.
func TestTokenBucket_A6Sequences(t *testing.T) {
	type step struct {
		event  byte    // 'f' or 's'
		tokens float64 // after it
		retry  bool    // whether a retry is allowed then
	}
	for _, tc := range []struct {
		name       string
		max        int
		ratio      float64
		steps      []step
		startEmpty int // failures to apply first
	}{
		{"A6 example: 10 tokens, ratio 0.1", 10, 0.1, []step{
			{'f', 9, true}, {'f', 8, true}, {'f', 7, true}, {'f', 6, true},
			{'f', 5, false}, // at the threshold: throttled
			{'s', 5.1, true}, {'f', 4.1, false}, {'s', 4.2, false},
		}, 0},
		{"ratio 0.5: half a token per success", 10, 0.5, []step{
			{'f', 9, true}, {'f', 8, true}, {'s', 8.5, true}, {'f', 7.5, true},
			{'f', 6.5, true}, {'f', 5.5, true}, {'f', 4.5, false}, {'s', 5, false}, {'s', 5.5, true},
		}, 0},
		{"never above maxTokens", 3, 1, []step{{'s', 3, true}, {'f', 2, true}, {'s', 3, true}, {'s', 3, true}}, 0},
		{"never below zero", 2, 0.1, []step{{'f', 0, false}, {'s', 0.1, false}}, 2},
		{"maxTokens 1: one failure throttles", 1, 0.25, []step{{'f', 0, false}, {'s', 0.25, false}, {'s', 0.5, false}, {'s', 0.75, true}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: tc.max, TokenRatio: tc.ratio})
			require.NoError(t, err)
			for range tc.startEmpty {
				b.Attempted(1, true, false)
			}
			for i, st := range tc.steps {
				b.Attempted(1, st.event == 'f', false)
				assert.InDelta(t, st.tokens, b.Tokens(), 1e-9, "step %d (%c)", i, st.event)
				assert.Equal(t, st.retry, b.Retry(0) == nil, "step %d (%c): retry allowed at %v tokens", i, st.event, b.Tokens())
			}
		})
	}
}

// TestTokenBucket_tokenRatioKeepsThreeDecimals: A6 says tokenRatio has
// "up to 3 decimal places"; more are dropped, not rounded.
func TestTokenBucket_tokenRatioKeepsThreeDecimals(t *testing.T) {
	for _, tc := range []struct{ ratio, back float64 }{
		{0.5466, 0.546}, {0.1, 0.1}, {0.57, 0.57}, {0.999, 0.999}, {0.0019, 0.001}, {1.2345, 1.234},
	} {
		b, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 10, TokenRatio: tc.ratio})
		require.NoError(t, err)
		for range 3 {
			b.Attempted(1, true, false)
		}
		b.Attempted(1, false, false)
		assert.InDelta(t, 7+tc.back, b.Tokens(), 1e-9, "TokenRatio %v", tc.ratio)
	}
}
