package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
)

// One budget per downstream, shared by every call to it: once failures
// have taken half its tokens, calls stop retrying at once instead of
// tripling the load on a downstream that is down.
func ExampleWithOverload_budget() {
	budget, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 10})
	if err != nil {
		panic(err)
	}
	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Budget: budget}), retry.WithBackoff(retry.Constant(0)))
	if err != nil {
		panic(err)
	}
	down := errors.New("connection refused")
	calls := 0
	for range 5 {
		err = r.Do(context.Background(), func(context.Context) error { calls++; return down })
	}
	fmt.Println("calls of fn:", calls, "(without a budget: 15)")
	fmt.Println(errors.Is(err, overload.ErrBudgetExhausted), errors.Is(err, down))
	// Output:
	// calls of fn: 8 (without a budget: 15)
	// true true
}

// Only the layer right above the failing one retries: an outer Do does
// not retry an error that an inner Retrier already gave up on.
func ExampleWithOverload_nestedRetries() {
	inner, _ := retry.New(retry.WithBackoff(retry.Constant(0)))
	outer, _ := retry.New(retry.WithBackoff(retry.Constant(0)))
	leaf := 0
	err := outer.Do(context.Background(), func(ctx context.Context) error {
		return inner.Do(ctx, func(context.Context) error { leaf++; return errors.New("down") })
	})
	fmt.Println("leaf calls:", leaf)
	fmt.Println(err)
	// Output:
	// leaf calls: 3
	// retry: attempts exhausted after 1 attempt: retry: attempts exhausted after 3 attempts: down
}

// One limit per downstream, shared by every call to it: an attempt takes
// a permit while it runs. With two attempts already in flight to a
// downstream limited to two, a third call is refused without reaching it.
func ExampleWithOverload_limit() {
	limit, err := overload.NewAdaptive(overload.AdaptiveOptions{Min: 2, Max: 2})
	if err != nil {
		panic(err)
	}
	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Limit: limit}))
	if err != nil {
		panic(err)
	}
	inFlight, release := make(chan struct{}), make(chan struct{})
	for range 2 {
		go func() {
			_ = r.Do(context.Background(), func(context.Context) error { inFlight <- struct{}{}; <-release; return nil })
		}()
		<-inFlight
	}
	err = r.Do(context.Background(), func(context.Context) error { return nil })
	fmt.Println(errors.Is(err, overload.ErrLimitExceeded), limit.Stats().InFlight)
	close(release)
	// Output:
	// true 2
}

// One pause per downstream: a 429 with Retry-After that one call meets
// holds every call's next attempt until then; a call whose deadline
// comes first ends at once, refused by the pause.
func ExampleWithOverload_pause() {
	pause, err := overload.NewPause(overload.PauseOptions{})
	if err != nil {
		panic(err)
	}
	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Pause: pause}))
	if err != nil {
		panic(err)
	}
	tooMany := errors.New("429 Too Many Requests")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = r.Do(ctx, func(context.Context) error { return retry.After(tooMany, time.Minute) })
	fmt.Println(errors.Is(err, tooMany), pause.Paused())
	err = r.Do(ctx, func(context.Context) error { return nil })
	fmt.Println(errors.Is(err, overload.ErrPaused), overload.RefuserOf(err))
	// Output:
	// true true
	// true pause
}

// A rate of attempts per downstream: past its burst, an attempt is
// refused before fn runs.
func ExampleWithOverload_rate() {
	rate, err := overload.NewRate(overload.RateOptions{PerSecond: 10, Burst: 2})
	if err != nil {
		panic(err)
	}
	r, err := retry.New(retry.WithOverload(&retry.OverloadOptions{Rate: rate}))
	if err != nil {
		panic(err)
	}
	for range 3 {
		err = r.Do(context.Background(), func(context.Context) error { return nil })
		fmt.Println(err == nil, errors.Is(err, overload.ErrRateLimited))
	}
	// Output:
	// true false
	// true false
	// false true
}
