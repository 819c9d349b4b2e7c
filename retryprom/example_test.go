package retryprom_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retryprom"
)

func ExampleNew() {
	reg := prometheus.NewRegistry()
	obs, err := retryprom.New(reg, retryprom.Options{})
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

	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if c := m.GetCounter(); c != nil && c.GetValue() > 0 {
				fmt.Print(f.GetName())
				for _, l := range m.GetLabel() {
					fmt.Printf(" %s=%s", l.GetName(), l.GetValue())
				}
				fmt.Println(":", c.GetValue())
			}
		}
	}
	// Output:
	// retry_attempts_total operation=charge-card: 3
	// retry_calls_total operation=charge-card outcome=success: 1
	// retry_retries_total operation=charge-card: 2
}

// A concurrency limit's figures are exported once, under the name of
// the downstream it guards, whichever operations share it.
func ExampleNewLimitCollector() {
	limit, err := overload.NewAdaptive(overload.AdaptiveOptions{Initial: 10})
	if err != nil {
		panic(err)
	}
	collector, err := retryprom.NewLimitCollector("payments-api", limit, retryprom.LimitOptions{})
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector)

	r, err := retry.New(retry.WithName("charge-card"), retry.WithOverload(&retry.OverloadOptions{Limit: limit}))
	if err != nil {
		panic(err)
	}
	_ = r.Do(context.Background(), func(context.Context) error {
		families, err := reg.Gather() // a scrape while the attempt holds its permit
		if err != nil {
			panic(err)
		}
		for _, f := range families {
			m := f.GetMetric()[0]
			value := m.GetGauge().GetValue()
			if c := m.GetCounter(); c != nil {
				value = c.GetValue()
			}
			fmt.Printf("%s{downstream=%s} %v\n", f.GetName(), m.GetLabel()[0].GetValue(), value)
		}
		return nil
	})
	// Output:
	// retry_concurrency_limit{downstream=payments-api} 10
	// retry_concurrency_limit_in_flight{downstream=payments-api} 1
	// retry_concurrency_limit_queued{downstream=payments-api} 0
	// retry_concurrency_limit_refused_total{downstream=payments-api} 0
}
