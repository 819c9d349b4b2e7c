package benchmarks

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
)

// BenchmarkLimitPermit takes a concurrency limit's permit for an attempt
// and gives it back as answered, from every goroutine of RunParallel:
// overload.Adaptive beside failsafe-go's adaptivelimiter, both with their
// defaults. TwoSharedAdds, two atomic adds to one word, is the floor of a
// permit that counts the attempts in flight exactly.
func BenchmarkLimitPermit(b *testing.B) {
	ctx := context.Background()
	b.Run("Floor/TwoSharedAdds", func(b *testing.B) {
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
				n.Add(-1)
			}
		})
	})
	b.Run("Steadfast/Adaptive", func(b *testing.B) {
		l, err := overload.NewAdaptive(overload.AdaptiveOptions{})
		require.NoError(b, err)
		first := overload.Attempt{Kind: overload.FirstAttempt}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if l.Acquire(ctx, first) == nil {
					l.Release(overload.Answered, 0)
				}
			}
		})
	})
	b.Run("FailsafeGo/AdaptiveLimiter", func(b *testing.B) {
		l := adaptivelimiter.NewWithDefaults[any]()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if p, ok := l.TryAcquirePermit(); ok {
					p.Record()
				}
			}
		})
	})
}

// BenchmarkLimitFirstTry is a first-try success through a retry policy
// and a concurrency limit, as users write them, from every goroutine of
// RunParallel: a Retrier with OverloadOptions.Limit (and New's default
// budget) beside failsafe-go's executor with a retry policy and its
// adaptive limiter; each library's call without the limit shows what the
// limit adds.
func BenchmarkLimitFirstTry(b *testing.B) {
	ctx := context.Background()
	steadfast := func(b *testing.B, opts ...retry.Option) {
		r, err := retry.New(append([]retry.Option{retry.WithMaxAttempts(3)}, opts...)...)
		require.NoError(b, err)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if r.Do(ctx, succeed) != nil {
					b.Fatal("failed")
				}
			}
		})
	}
	failsafeGo := func(b *testing.B, policies ...failsafe.Policy[any]) {
		exec := failsafe.With(append([]failsafe.Policy[any]{retrypolicy.NewBuilder[any]().WithMaxAttempts(3).Build()}, policies...)...).WithContext(ctx)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if exec.Run(func() error { return succeed(ctx) }) != nil {
					b.Fatal("failed")
				}
			}
		})
	}
	b.Run("Steadfast/Retrier", func(b *testing.B) { steadfast(b) })
	b.Run("Steadfast/RetrierWithLimit", func(b *testing.B) {
		l, err := overload.NewAdaptive(overload.AdaptiveOptions{})
		require.NoError(b, err)
		steadfast(b, retry.WithOverload(&retry.OverloadOptions{Limit: l}))
	})
	b.Run("FailsafeGo/Executor", func(b *testing.B) { failsafeGo(b) })
	b.Run("FailsafeGo/ExecutorWithLimiter", func(b *testing.B) {
		failsafeGo(b, adaptivelimiter.NewWithDefaults[any]())
	})
}
