package benchmarks

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
)

// BenchmarkRateAdmit admits one attempt through a rate limit that never
// refuses (a billion a second), from one goroutine: overload.Rate beside
// golang.org/x/time/rate's Allow and failsafe-go's smooth rate limiter.
// ClockReading, one reading of the monotonic clock, is the floor of any
// rate limit that is exact: each admission must know the time.
func BenchmarkRateAdmit(b *testing.B) {
	ctx := context.Background()
	b.Run("Floor/ClockReading", func(b *testing.B) {
		base := time.Now()
		for b.Loop() {
			if time.Since(base) < 0 {
				b.Fatal("never")
			}
		}
	})
	b.Run("Steadfast/Rate", func(b *testing.B) {
		r, err := overload.NewRate(overload.RateOptions{PerSecond: 1e9})
		require.NoError(b, err)
		first := overload.Attempt{Kind: overload.FirstAttempt}
		b.ReportAllocs()
		for b.Loop() {
			if r.Admit(ctx, first) != nil {
				b.Fatal("refused")
			}
		}
	})
	b.Run("XTimeRate/Allow", func(b *testing.B) {
		l := rate.NewLimiter(1e9, 1e9)
		b.ReportAllocs()
		for b.Loop() {
			if !l.Allow() {
				b.Fatal("refused")
			}
		}
	})
	b.Run("FailsafeGo/SmoothRateLimiter", func(b *testing.B) {
		l := ratelimiter.NewSmooth[any](1e9, time.Second)
		b.ReportAllocs()
		for b.Loop() {
			if !l.TryAcquirePermit() {
				b.Fatal("refused")
			}
		}
	})
}

// BenchmarkRateFirstTry is a first-try success of a Retrier (New's
// default budget) without and with a rate and a pause that never act:
// what each adds to a call.
func BenchmarkRateFirstTry(b *testing.B) {
	ctx := context.Background()
	run := func(b *testing.B, o *retry.OverloadOptions) {
		r, err := retry.New(retry.WithMaxAttempts(3), retry.WithOverload(o))
		require.NoError(b, err)
		b.ReportAllocs()
		for b.Loop() {
			if r.Do(ctx, succeed) != nil {
				b.Fatal("failed")
			}
		}
	}
	b.Run("Steadfast/Retrier", func(b *testing.B) { run(b, nil) })
	b.Run("Steadfast/RetrierWithPause", func(b *testing.B) {
		p, err := overload.NewPause(overload.PauseOptions{})
		require.NoError(b, err)
		run(b, &retry.OverloadOptions{Pause: p})
	})
	b.Run("Steadfast/RetrierWithRate", func(b *testing.B) {
		rt, err := overload.NewRate(overload.RateOptions{PerSecond: 1e9})
		require.NoError(b, err)
		run(b, &retry.OverloadOptions{Rate: rt})
	})
}
