package retryprom_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryprom"
)

// BenchmarkObserver is a first-try success through a prebuilt Retrier
// with the Prometheus observer.
func BenchmarkObserver(b *testing.B) {
	obs, err := retryprom.New(prometheus.NewRegistry(), retryprom.Options{})
	if err != nil {
		b.Fatal(err)
	}
	r, err := retry.New(retry.WithName("charge-card"), retry.WithObserver(obs))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		_ = r.Do(ctx, fn)
	}
}
