package retryslog_test

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/benbjohnson/clock"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/retryslog"
)

// A slog observer logs retries at Info (or Debug), permanent failures at
// Warn and exhaustion at Error, and never the payload.
func ExampleNew() {
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
		retry.WithObserver(retryslog.New(logger, nil)),
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

// A refused call's record says who refused it: here a concurrency limit
// whose only permit another caller holds, so fn is not called.
func ExampleNew_refusedByALimit() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{} // for a stable output
			}
			return a
		},
	}))
	limit, err := overload.NewAdaptive(overload.AdaptiveOptions{Min: 1, Max: 1})
	if err != nil {
		panic(err)
	}
	r, err := retry.New(
		retry.WithName("charge-card"),
		retry.WithObserver(retryslog.New(logger, nil)),
		retry.WithOverload(&retry.OverloadOptions{Limit: limit}),
		retry.WithClock(clock.NewMock()), // elapsed stays 0s
	)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	_ = limit.Acquire(ctx, overload.Attempt{}) // another caller's attempt
	defer limit.Release(overload.Dropped, 0)
	_ = r.Do(ctx, func(context.Context) error { return nil })
	// Output:
	// level=ERROR msg="retry: gave up" operation=charge-card outcome=refused refused_by=limit attempts=0 elapsed=0s error="retry: concurrency limit reached before the first attempt"
}
