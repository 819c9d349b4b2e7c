package retryotel_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retryotel"
)

// BenchmarkObserver is a first-try success through a prebuilt Retrier
// with the OpenTelemetry observer on an SDK meter provider, with no span
// in the context.
func BenchmarkObserver(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	obs, err := retryotel.New(mp, retryotel.Options{})
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
