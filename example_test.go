package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrytest"
)

// errUnavailable stands for a transient failure, such as an HTTP 503.
var errUnavailable = errors.New("service unavailable")

// printAttempts is an Observer that prints each attempt and wait.
type printAttempts struct{}

func (printAttempts) OnAttemptStart(context.Context, retry.AttemptStart) {}
func (printAttempts) OnAttemptEnd(_ context.Context, e retry.AttemptEnd) {
	fmt.Printf("attempt %d: %v\n", e.Attempt, e.Err)
}
func (printAttempts) OnRetry(_ context.Context, e retry.Scheduled) {
	fmt.Printf("waiting %v\n", e.Delay)
}
func (printAttempts) OnWaitEnd(context.Context, retry.WaitEnd) {} // OnRetry printed the wait
func (printAttempts) OnDone(_ context.Context, e retry.Done) {
	fmt.Printf("%s after %d attempts\n", e.Outcome, e.Attempts)
}

func ExampleDo() {
	calls := 0
	err := retry.Do(context.Background(), func(ctx context.Context) error {
		calls++
		if calls < 3 {
			return errUnavailable
		}
		return nil
	},
		retry.WithMaxAttempts(5),
		retry.WithBackoff(retry.Constant(time.Nanosecond)), // keeps the example instant
		retry.WithObserver(printAttempts{}),
	)
	fmt.Println("err:", err)
	// Output:
	// attempt 1: service unavailable
	// waiting 0s
	// attempt 2: service unavailable
	// waiting 0s
	// attempt 3: <nil>
	// success after 3 attempts
	// err: <nil>
}

func ExampleDoValue() {
	calls := 0
	balance, err := retry.DoValue(context.Background(), func(ctx context.Context) (int, error) {
		calls++
		if calls == 1 {
			return 0, errUnavailable
		}
		return 42, nil
	}, retry.WithBackoff(retry.Constant(0)))
	fmt.Println(balance, err, calls)
	// Output: 42 <nil> 2
}

func ExampleRetrier_Do() {
	// Build once, share everywhere: a Retrier is immutable and safe for
	// concurrent use.
	r, err := retry.New(retry.WithMaxAttempts(2), retry.WithBackoff(retry.Constant(0)))
	if err != nil {
		panic(err)
	}
	err = r.Do(context.Background(), func(ctx context.Context) error {
		return errUnavailable
	})
	var re *retry.Error
	if errors.As(err, &re) {
		fmt.Println(re.Outcome, re.Attempts)
	}
	fmt.Println(errors.Is(err, retry.ErrExhausted), errors.Is(err, errUnavailable))
	fmt.Println(err)
	// Output:
	// exhausted 2
	// true true
	// retry: attempts exhausted after 2 attempts: service unavailable
}

func ExamplePermanent() {
	errNotFound := errors.New("404 not found")
	calls := 0
	err := retry.Do(context.Background(), func(ctx context.Context) error {
		calls++
		return fmt.Errorf("get user: %w", retry.Permanent(errNotFound))
	}, retry.WithMaxAttempts(5))
	fmt.Println(calls, errors.Is(err, errNotFound))
	fmt.Println(err)
	// Output:
	// 1 true
	// retry: permanent error after 1 attempt: get user: 404 not found
}

func ExampleAfter() {
	calls := 0
	err := retry.Do(context.Background(), func(ctx context.Context) error {
		calls++
		if calls == 1 {
			// A 429 with "Retry-After: 120": wait that long, but no
			// longer than WithMaxDelay allows.
			return retry.After(errors.New("429 too many requests"), 120*time.Second)
		}
		return nil
	},
		retry.WithMaxDelay(time.Nanosecond), // a tiny cap keeps the example instant
		retry.WithObserver(printAttempts{}),
	)
	fmt.Println("err:", err)
	// Output:
	// attempt 1: 429 too many requests
	// waiting 1ns
	// attempt 2: <nil>
	// success after 2 attempts
	// err: <nil>
}

func ExampleBackoffFunc() {
	// A custom schedule: 1s, 2s, 3s, then 5s for every later wait.
	steps := retry.BackoffFunc(func(attempt int) time.Duration {
		if attempt > 3 {
			return 5 * time.Second
		}
		return time.Duration(attempt) * time.Second
	})
	for attempt := 1; attempt <= 5; attempt++ {
		fmt.Print(steps.Delay(attempt, 0, 0), ";")
	}
	fmt.Println()
	_, err := retry.New(retry.WithBackoff(steps), retry.WithJitter(retry.EqualJitter))
	fmt.Println(err)
	// Output:
	// 1s;2s;3s;5s;5s;
	// <nil>
}

func ExampleExponential() {
	b := retry.Exponential(100*time.Millisecond, 2, time.Second)
	for attempt := 1; attempt <= 6; attempt++ {
		fmt.Print(b.Delay(attempt, 0, 0), ";")
	}
	fmt.Println()
	// Output: 100ms;200ms;400ms;800ms;1s;1s;
}

// Testing retrying code with a mock clock: retrytest.Clock is a
// *clock.Mock that says when Do has armed a wait, so the test advances it
// only then. Advancing a mock before Do has armed its timer would leave Do
// waiting forever.
func Example_mockClock() {
	clk := retrytest.NewClock()
	r, _ := retry.New(
		retry.WithClock(clk),
		retry.WithBackoff(retry.Exponential(time.Second, 2, time.Minute)),
		retry.WithJitter(retry.NoJitter),
	)

	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- r.Do(context.Background(), func(ctx context.Context) error {
			calls++
			if calls < 3 {
				return errUnavailable
			}
			return nil
		})
	}()
	for range 2 {
		d := <-clk.Armed() // Do is parked on the mock's timer now
		fmt.Println("advancing", d)
		clk.Add(d)
	}
	fmt.Println(<-done, calls)
	// Output:
	// advancing 1s
	// advancing 2s
	// <nil> 3
}

func ExampleJitter_Apply() {
	// The Retrier draws u in [0, 1); here it is fixed to show the ranges.
	d := 10 * time.Second
	for _, j := range []retry.Jitter{retry.NoJitter, retry.FullJitter, retry.EqualJitter, retry.ProportionalJitter(0.25)} {
		fmt.Printf("%v: %v to %v\n", j, j.Apply(d, 0), j.Apply(d, 0.999))
	}
	// Output:
	// NoJitter: 10s to 10s
	// FullJitter: 0s to 9.99s
	// EqualJitter: 5s to 9.995s
	// ProportionalJitter(0.25): 7.5s to 12.495s
}
