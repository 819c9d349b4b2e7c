package retrystats_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrystats"
)

// Stats counts every call made through the Retriers it observes.
func ExampleStats() {
	var stats retrystats.Stats // the zero Stats is ready to use
	r, err := retry.New(retry.WithObserver(&stats), retry.WithBackoff(retry.Constant(0)))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	calls := 0
	_ = r.Do(ctx, func(context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("connection refused")
		}
		return nil
	})
	_ = r.Do(ctx, func(context.Context) error { return retry.Permanent(errors.New("invalid card")) })

	s := stats.Snapshot()
	fmt.Println("calls:", s.Calls(), "success:", s.Success, "permanent:", s.Permanent)
	fmt.Println("attempts:", s.Attempts, "retries:", s.Retries)
	fmt.Println("in flight:", s.InFlight, "waiting:", s.Waiting)
	fmt.Println("calls with 1 attempt:", s.AttemptsPerCall[0], "with 3:", s.AttemptsPerCall[2])
	// Output:
	// calls: 2 success: 1 permanent: 1
	// attempts: 4 retries: 2
	// in flight: 0 waiting: 0
	// calls with 1 attempt: 1 with 3: 1
}

// A refused call counts in Refused, and by who refused it: here a
// concurrency limit whose only permit another caller holds.
func ExampleStats_refusals() {
	var stats retrystats.Stats
	limit, err := overload.NewAdaptive(overload.AdaptiveOptions{Min: 1, Max: 1})
	if err != nil {
		panic(err)
	}
	r, err := retry.New(retry.WithObserver(&stats), retry.WithOverload(&retry.OverloadOptions{Limit: limit}))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	_ = limit.Acquire(ctx, overload.Attempt{}) // another caller's attempt
	defer limit.Release(overload.Dropped, 0)
	err = r.Do(ctx, func(context.Context) error { return nil })
	fmt.Println("matches ErrLimitExceeded:", errors.Is(err, overload.ErrLimitExceeded))

	s := stats.Snapshot()
	fmt.Println("refused:", s.Refused, "by a limit:", s.LimitRefused, "by a budget:", s.BudgetDenied, "by a breaker:", s.CircuitOpen)
	// Output:
	// matches ErrLimitExceeded: true
	// refused: 1 by a limit: 1 by a budget: 0 by a breaker: 0
}
