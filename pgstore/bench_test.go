package pgstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadfast-go/retry/idempotency"
)

// BenchmarkClaimComplete measures one idempotent call's store traffic on
// a fresh key: a Claim that acquires it and a Complete that stores the
// outcome, two round trips and two commits. ns/op of the parallel run is
// the inverse of throughput.
func BenchmarkClaimComplete(b *testing.B) {
	store, _, _ := newStore(b, nil)
	ctx := context.Background()
	rec := idempotency.StoredOutcome{Value: []byte(`{"id":12345,"status":"ok"}`)}
	var n atomic.Int64 // keys stay fresh across the runs of each sub-benchmark
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			key := "serial-" + strconv.FormatInt(n.Add(1), 10)
			claimComplete(b, ctx, store, key, rec)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(8) // 8 callers per CPU: the work waits on the server
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				key := "parallel-" + strconv.FormatInt(n.Add(1), 10)
				claimComplete(b, ctx, store, key, rec)
			}
		})
	})
}

func claimComplete(b *testing.B, ctx context.Context, store interface {
	Claim(context.Context, string, string, time.Duration) (idempotency.Claim, error)
	Complete(context.Context, string, string, idempotency.StoredOutcome, time.Duration) error
}, key string, rec idempotency.StoredOutcome) {
	c, err := store.Claim(ctx, key, "fp", time.Minute)
	if err != nil || c.Status != idempotency.ClaimAcquired {
		b.Fatalf("claim %s: %v %v", key, c.Status, err)
	}
	if err := store.Complete(ctx, key, c.Token, rec, time.Hour); err != nil {
		b.Fatalf("complete %s: %v", key, err)
	}
}

// BenchmarkClaimCompleted measures a replay: a Claim that finds the
// stored outcome (the path every duplicate call takes).
func BenchmarkClaimCompleted(b *testing.B) {
	store, _, _ := newStore(b, nil)
	ctx := context.Background()
	c, err := store.Claim(ctx, "k", "fp", time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	if err := store.Complete(ctx, "k", c.Token, idempotency.StoredOutcome{Value: []byte("v")}, time.Hour); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c, err := store.Claim(ctx, "k", "fp", time.Minute)
			if err != nil || c.Status != idempotency.ClaimCompleted {
				b.Fatalf("claim: %v %v", c.Status, err)
			}
		}
	})
}
