package retry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/benbjohnson/clock"

	"github.com/steadfast-go/retry"
)

// Stats counts every call made through the Retriers it observes.
func ExampleNewStats() {
	stats := retry.NewStats()
	r, err := retry.New(retry.WithObserver(stats), retry.WithBackoff(retry.Constant(0)))
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

// A slog observer logs retries at Info (or Debug), permanent failures at
// Warn and exhaustion at Error, and never the payload.
func ExampleNewSlogObserver() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{} // for a stable output
			}
			return a
		},
	}))
	r, err := retry.New(
		retry.WithName("charge-card"),
		retry.WithObserver(retry.NewSlogObserver(logger, nil)),
		retry.WithMaxAttempts(2),
		retry.WithBackoff(retry.Constant(0)),
		retry.WithClock(clock.NewMock()), // elapsed stays 0s
	)
	if err != nil {
		panic(err)
	}
	_ = r.Do(context.Background(), func(context.Context) error {
		return errors.New("connection refused")
	})
	// Output:
	// level=INFO msg="retry: attempt failed, retrying" operation=charge-card attempt=1 delay=0s error="connection refused"
	// level=ERROR msg="retry: gave up" operation=charge-card outcome=exhausted attempts=2 elapsed=0s error="retry: attempts exhausted after 2 attempts: connection refused"
}
