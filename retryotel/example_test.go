package retryotel_test

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retryotel"
)

func ExampleNew() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = provider.Shutdown(context.Background()) }()

	obs, err := retryotel.New(provider, retryotel.Options{})
	if err != nil {
		panic(err)
	}
	r, err := retry.New(retry.WithName("charge-card"), retry.WithObserver(obs), retry.WithBackoff(retry.Constant(0)))
	if err != nil {
		panic(err)
	}
	calls := 0
	_ = r.Do(context.Background(), func(context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("connection refused")
		}
		return nil
	})

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && sum.IsMonotonic {
			for _, p := range sum.DataPoints {
				if p.Value > 0 {
					fmt.Println(m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value)
				}
			}
		}
	}
	// Output:
	// retry.calls retry.operation=charge-card,retry.outcome=success 1
	// retry.attempts retry.operation=charge-card 3
	// retry.retries retry.operation=charge-card 2
}

// A concurrency limit's figures are reported once, under the name of the
// downstream it guards, whichever operations share it.
func ExampleRegisterLimit() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = provider.Shutdown(context.Background()) }()

	limit, err := overload.NewAdaptive(overload.AdaptiveOptions{Initial: 10})
	if err != nil {
		panic(err)
	}
	registration, err := retryotel.RegisterLimit(provider, "payments-api", limit)
	if err != nil {
		panic(err)
	}
	defer func() { _ = registration.Unregister() }()

	r, err := retry.New(retry.WithName("charge-card"), retry.WithOverload(&retry.OverloadOptions{Limit: limit}))
	if err != nil {
		panic(err)
	}
	_ = r.Do(context.Background(), func(ctx context.Context) error {
		var rm metricdata.ResourceMetrics // a collection while the attempt holds its permit
		if err := reader.Collect(ctx, &rm); err != nil {
			panic(err)
		}
		for _, m := range rm.ScopeMetrics[0].Metrics {
			p := m.Data.(metricdata.Sum[int64]).DataPoints[0]
			fmt.Println(m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value)
		}
		return nil
	})
	// Output:
	// retry.concurrency_limit retry.downstream=payments-api 10
	// retry.concurrency_limit.in_flight retry.downstream=payments-api 1
	// retry.concurrency_limit.queued retry.downstream=payments-api 0
	// retry.concurrency_limit.refused retry.downstream=payments-api 0
}
