package retrygobreaker_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/sony/gobreaker/v2"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retrygobreaker"
)

func ExampleNewBreaker() {
	b, err := retrygobreaker.NewBreaker(gobreaker.Settings{
		Name:        "payments",
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 2 },
	})
	if err != nil {
		panic(err)
	}
	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Breaker: b}), retry.WithMaxAttempts(3), retry.WithBackoff(retry.Constant(0)))
	if err != nil {
		panic(err)
	}
	calls := 0
	charge := func(context.Context) error {
		calls++
		return errors.New("connection refused")
	}

	// Two failed attempts open the breaker; the third is refused.
	err = r.Do(context.Background(), charge)
	fmt.Println(err)
	// While it is open, a call does not reach the downstream at all.
	err = r.Do(context.Background(), charge)
	fmt.Println(err)
	var re *retry.Error
	fmt.Println(errors.As(err, &re) && re.Outcome == retry.OutcomeRefused,
		errors.Is(err, overload.ErrCircuitOpen), errors.Is(err, gobreaker.ErrOpenState), calls)
	// Output:
	// retry: circuit open: breaker "payments" is open after 2 attempts: connection refused
	// retry: circuit open: breaker "payments" is open before the first attempt
	// true true true 2
}
