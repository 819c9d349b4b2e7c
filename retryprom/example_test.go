package retryprom_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadfast-go/retry"
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
