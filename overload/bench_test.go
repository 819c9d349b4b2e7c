package overload_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry/overload"
)

// TestAllocs: a budget's bookkeeping and its refusals allocate nothing.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates; run without -race")
	}
	bucket, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxWaiting: 1})
	require.NoError(t, err)
	empty, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 2})
	require.NoError(t, err)
	empty.Attempted(1, true, false)
	ratio, err := overload.NewRatio(overload.RatioOptions{Clock: clock.NewMock()})
	require.NoError(t, err)
	var zero overload.Ratio
	var zeroBucket overload.TokenBucket
	ctx := context.Background()
	limit, err := overload.NewAdaptive(overload.AdaptiveOptions{})
	require.NoError(t, err)
	full, err := overload.NewAdaptive(overload.AdaptiveOptions{Min: 1, Max: 1})
	require.NoError(t, err)
	require.NoError(t, full.Acquire(ctx, firstAttempt))
	// A limit whose one permit is held and whose queue of one is taken:
	// a refusal from the full queue arms no timer and makes no waiter.
	fullQueue, err := overload.NewAdaptive(overload.AdaptiveOptions{Min: 1, Max: 1, MaxQueued: 1, QueueTimeout: time.Hour})
	require.NoError(t, err)
	require.NoError(t, fullQueue.Acquire(ctx, firstAttempt))
	queued := make(chan error, 1)
	go func() { queued <- fullQueue.Acquire(ctx, firstAttempt) }()
	require.Eventually(t, func() bool { return fullQueue.Stats().Queued == 1 }, 5*time.Second, time.Millisecond)
	defer func() { fullQueue.Release(overload.Dropped, 0); require.NoError(t, <-queued) }()
	for _, tc := range []struct {
		name       string
		wantAllocs float64
		fn         func()
	}{
		{"bucket_success", 0, func() { bucket.Attempted(1, false, false) }},
		{"bucket_failure", 0, func() { bucket.Attempted(1, true, false); bucket.Attempted(1, false, false) }},
		{"bucket_retry_and_wait", 0, func() { _ = bucket.Retry(time.Second); bucket.Waited() }},
		{"bucket_refusal", 0, func() { _ = empty.Retry(0) }},
		{"ratio_first_attempt", 0, func() { ratio.Attempted(1, false, false) }},
		{"ratio_retry", 0, func() { _ = ratio.Retry(0) }},
		{"bucket_zero_refusal", 0, func() { _ = zeroBucket.Retry(0) }},
		{"ratio_zero_refusal", 0, func() { _ = zero.Retry(0) }},
		{"limit_permit", 0, func() { _ = limit.Acquire(ctx, firstAttempt); limit.Release(overload.Answered, 0) }},
		{"limit_refusal", 0, func() { _ = full.Acquire(ctx, firstAttempt) }},
		{"limit_full_queue_refusal", 0, func() { _ = fullQueue.Acquire(ctx, firstAttempt) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.LessOrEqual(t, testing.AllocsPerRun(1000, tc.fn), tc.wantAllocs)
		})
	}
}

// BenchmarkTokenBucket_success is what a first-try success costs a Retrier
// with a token bucket: one atomic load while the bucket is full (Full,
// which the Retrier checks inline, as here).
func BenchmarkTokenBucket_success(b *testing.B) {
	bucket, err := overload.NewTokenBucket(overload.TokenBucketOptions{})
	require.NoError(b, err)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !bucket.Full() {
				bucket.Attempted(1, false, false)
			}
		}
	})
}

// BenchmarkRatio_firstAttempt is what a call costs a Ratio budget: one
// atomic add, on the line of 64 its caller's stack picks.
func BenchmarkRatio_firstAttempt(b *testing.B) {
	ratio, err := overload.NewRatio(overload.RatioOptions{})
	require.NoError(b, err)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ratio.Attempted(1, false, false)
		}
	})
}

// BenchmarkTokenBucket_retry is a failure and the retry it asks for.
func BenchmarkTokenBucket_retry(b *testing.B) {
	bucket, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 1000, TokenRatio: 1000})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		bucket.Attempted(1, true, false)
		_ = bucket.Retry(0)
		bucket.Attempted(2, false, false)
	}
}

// BenchmarkRatio_retry is a retry asked of a Ratio budget: a clock read and
// a mutex.
func BenchmarkRatio_retry(b *testing.B) {
	ratio, err := overload.NewRatio(overload.RatioOptions{Ratio: 10})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		ratio.Attempted(1, false, false)
		_ = ratio.Retry(0)
	}
}

// firstAttempt is what Do tells a limit of a call's first attempt.
var firstAttempt = overload.Attempt{Kind: overload.FirstAttempt}

// BenchmarkAdaptive_permit is what the limit costs an attempt that it
// lets through and that succeeds: one atomic add to take the permit, one
// to give it back and count it (the window then closes once per limit's
// worth of them).
func BenchmarkAdaptive_permit(b *testing.B) {
	l, err := overload.NewAdaptive(overload.AdaptiveOptions{})
	require.NoError(b, err)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if l.Acquire(ctx, firstAttempt) == nil {
				l.Release(overload.Answered, 0)
			}
		}
	})
}

// BenchmarkAdaptive_permitOneCaller is the permit of one caller alone,
// as a first try through a Retrier takes it: what its path costs beside
// the two atomic adds.
func BenchmarkAdaptive_permitOneCaller(b *testing.B) {
	l, err := overload.NewAdaptive(overload.AdaptiveOptions{})
	require.NoError(b, err)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if l.Acquire(ctx, firstAttempt) == nil {
			l.Release(overload.Answered, 0)
		}
	}
}

// BenchmarkFloor_twoSharedAdds is the permit's floor: two atomic adds to
// one shared word, by every goroutine.
func BenchmarkFloor_twoSharedAdds(b *testing.B) {
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n.Add(1)
			n.Add(-1)
		}
	})
}

// The floors of the two benchmarks above: one atomic load of a shared
// word, and one atomic add to it, by every goroutine.
func BenchmarkFloor_sharedLoad(b *testing.B) {
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if n.Load() < 0 {
				b.Fatal("never")
			}
		}
	})
}

func BenchmarkFloor_sharedAdd(b *testing.B) {
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n.Add(1)
		}
	})
}

// BenchmarkRate_admit is what the rate costs an attempt it admits: a
// clock reading and one compare-and-swap of a shared word. The rate is
// high enough that none is refused.
func BenchmarkRate_admit(b *testing.B) {
	r, err := overload.NewRate(overload.RateOptions{PerSecond: 1e9})
	require.NoError(b, err)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r.Admit(ctx, firstAttempt) != nil {
			b.Fatal("refused")
		}
	}
}

// BenchmarkPause_notPaused is what a pause costs a call while its
// downstream is not paused: one atomic load.
func BenchmarkPause_notPaused(b *testing.B) {
	p, err := overload.NewPause(overload.PauseOptions{})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if p.Paused() {
			b.Fatal("paused")
		}
	}
}

// BenchmarkFloor_clockReading is the rate's floor beside its one
// compare-and-swap: a reading of the monotonic clock.
func BenchmarkFloor_clockReading(b *testing.B) {
	base := time.Now()
	for b.Loop() {
		if time.Since(base) < 0 {
			b.Fatal("never")
		}
	}
}
