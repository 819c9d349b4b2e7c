package redislimit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/redislimit"
)

// The benchmarks admit every attempt: a limit of 1e6/s with a burst of
// 1e6 has room for any b.N, so that ours and redis_rate's by hand do the
// same work, one EVALSHA each. They report the round trips per
// admission, counted by a hook on the client.
const benchPerSecond = 1e6

// benchClient is a client of the test server that counts its commands.
func benchClient(b *testing.B) (*redis.Client, *atomic.Int64) {
	c := newClient(b)
	var n atomic.Int64
	c.AddHook(countHook{n: &n})
	return c, &n
}

// loop runs admit b.N times, or from GOMAXPROCS goroutines with
// parallel, and reports the round trips per admission.
func loop(b *testing.B, commands *atomic.Int64, parallel bool, admit func(context.Context) error) {
	ctx := context.Background()
	if err := admit(ctx); err != nil { // the connection made, the script cached
		b.Fatal(err)
	}
	commands.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := admit(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	} else {
		for range b.N {
			if err := admit(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(commands.Load())/float64(b.N), "round-trips/op")
}

func benchRate(b *testing.B, parallel, partitioned bool) {
	c, commands := benchClient(b)
	// A second's Timeout: on a loaded machine a round trip may pass the
	// default 50ms, and the admissions that then skip Redis would be
	// timed as if they were ours on Redis. None may.
	r := newRate(b, c, redislimit.RateOptions{PerSecond: benchPerSecond, Partitioned: partitioned, Timeout: time.Second})
	first := overload.Attempt{Kind: overload.FirstAttempt}
	loop(b, commands, parallel, func(ctx context.Context) error {
		if partitioned {
			ctx = overload.WithPartition(ctx, "tenant-7")
		}
		return r.Admit(ctx, first)
	})
	if s := r.Stats(); s.Fallbacks != 0 {
		b.Fatalf("%d admissions skipped Redis (%d round trips failed): the figures mix in the Fallback's", s.Fallbacks, s.Errors)
	}
}

// BenchmarkRate_admit is Rate.Admit, the attempt admitted.
func BenchmarkRate_admit(b *testing.B) { benchRate(b, false, false) }

// BenchmarkRate_admitPartitioned is Rate.Admit of a partition.
func BenchmarkRate_admitPartitioned(b *testing.B) { benchRate(b, false, true) }

// BenchmarkRate_admitParallel is Rate.Admit from GOMAXPROCS goroutines.
func BenchmarkRate_admitParallel(b *testing.B) { benchRate(b, true, false) }

func benchByHand(b *testing.B, parallel bool) {
	c, commands := benchClient(b)
	limiter := redis_rate.NewLimiter(c)
	limit := redis_rate.PerSecond(benchPerSecond)
	key := testKey(b, c)
	loop(b, commands, parallel, func(ctx context.Context) error {
		res, err := limiter.Allow(ctx, key, limit)
		if err == nil && res.Allowed == 0 {
			return errRefused
		}
		return err
	})
}

var errRefused = &redislimit.RateLimitedError{RetryAfter: time.Nanosecond}

// BenchmarkRedisRate_byHand is redis_rate's Limiter.Allow called
// directly with the same limit as BenchmarkRate_admit.
func BenchmarkRedisRate_byHand(b *testing.B) { benchByHand(b, false) }

// BenchmarkRedisRate_byHandParallel is BenchmarkRedisRate_byHand from
// GOMAXPROCS goroutines.
func BenchmarkRedisRate_byHandParallel(b *testing.B) { benchByHand(b, true) }
