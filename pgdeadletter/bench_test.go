package pgdeadletter_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
)

// BenchmarkPut stores one record per operation, one at a time: the cost
// of a dead letter to the call that gave up.
func BenchmarkPut(b *testing.B) {
	s := pgdltest.Sink(b, pgdltest.Pool(b))
	dl := record("", "charge-card", retry.OutcomeExhausted, time.Now())
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		dl.ID = strconv.Itoa(i)
		if err := s.Put(b.Context(), dl); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
}

// BenchmarkPutParallel stores records from GOMAXPROCS goroutines at once
// through one pool, as a busy service would.
func BenchmarkPutParallel(b *testing.B) {
	s := pgdltest.Sink(b, pgdltest.Pool(b))
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		dl := record("", "charge-card", retry.OutcomeExhausted, time.Now())
		for pb.Next() {
			dl.ID = strconv.FormatInt(next.Add(1), 10)
			if err := s.Put(b.Context(), dl); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
}
