package retrystats_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/steadfast-go/retry"
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
