package redisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
)

// BenchmarkClaimComplete measures a first-time key, claimed and completed,
// one at a time on one connection: the latency-bound cost per Do call.
func BenchmarkClaimComplete(b *testing.B) {
	s, rt := newCountedStore(b, 1)
	ctx := context.Background()
	rec := idempotency.StoredOutcome{Value: []byte(`{"id":42,"status":"ok"}`)}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		key := strconv.Itoa(i)
		i++
		cl, err := s.Claim(ctx, key, "fingerprint", time.Minute)
		if err != nil || cl.Status != idempotency.ClaimAcquired {
			b.Fatal(cl.Status, err)
		}
		if err := s.Complete(ctx, key, cl.Token, rec, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "keys/s")
	b.ReportMetric(float64(rt.writes.Load())/float64(i), "round-trips/op")
}

// BenchmarkClaimCompleteParallel is BenchmarkClaimComplete from
// GOMAXPROCS goroutines sharing one Store and the client's pool.
func BenchmarkClaimCompleteParallel(b *testing.B) {
	s, rt := newCountedStore(b, 0)
	ctx := context.Background()
	rec := idempotency.StoredOutcome{Value: []byte(`{"id":42,"status":"ok"}`)}
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := strconv.FormatInt(next.Add(1), 10)
			cl, err := s.Claim(ctx, key, "fingerprint", time.Minute)
			if err != nil || cl.Status != idempotency.ClaimAcquired {
				b.Error(cl.Status, err)
				return
			}
			if err := s.Complete(ctx, key, cl.Token, rec, time.Minute); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(next.Load())/b.Elapsed().Seconds(), "keys/s")
	b.ReportMetric(float64(rt.writes.Load())/float64(next.Load()), "round-trips/op")
}

// BenchmarkDo measures retry.DoValue with this store on a first-time key
// whose fn succeeds at once: claim, fn, complete.
func BenchmarkDo(b *testing.B) {
	s, rt := newCountedStore(b, 1)
	r, err := retry.New(retry.WithIdempotency(s, nil))
	if err != nil {
		b.Fatal(err)
	}
	fn := func(context.Context) (string, error) { return "receipt", nil }
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ctx := retry.ContextWithIdempotencyKey(context.Background(), strconv.Itoa(i))
		i++
		if _, err := retry.DoValueOn(ctx, r, fn); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "keys/s")
	b.ReportMetric(float64(rt.writes.Load())/float64(i), "round-trips/op")
}
