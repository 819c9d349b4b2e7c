package retry_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
)

// TestRetrierDo_firstAttemptShortcutMatchesTheLoop: without an observer,
// time budget or attempt timeout, Retrier.Do makes the first attempt
// before setting up its loop. Whatever that attempt does, the call must
// end as it does on the loop's own path, which an observer forces.
func TestRetrierDo_firstAttemptShortcutMatchesTheLoop(t *testing.T) {
	cases := map[string]func(ctx context.Context, cancel context.CancelFunc, call int) error{
		"first_try_success":      func(context.Context, context.CancelFunc, int) error { return nil },
		"transient_then_success": func(_ context.Context, _ context.CancelFunc, call int) error { return failUntil(call, 3) },
		"always_transient":       func(context.Context, context.CancelFunc, int) error { return errTransient },
		"permanent":              func(context.Context, context.CancelFunc, int) error { return retry.Permanent(errFatal) },
		"wrapped_canceled":       func(context.Context, context.CancelFunc, int) error { return fmt.Errorf("q: %w", context.Canceled) },
		"cancel_during_attempt":  func(ctx context.Context, cancel context.CancelFunc, _ int) error { cancel(); return ctx.Err() },
		"cancel_then_transient":  func(_ context.Context, cancel context.CancelFunc, _ int) error { cancel(); return errTransient },
		"cancel_then_permanent": func(_ context.Context, cancel context.CancelFunc, _ int) error {
			cancel()
			return retry.Permanent(errFatal)
		},
		"cancel_on_second_call":   func(_ context.Context, cancel context.CancelFunc, call int) error { return cancelOn(call, 2, cancel) },
		"retry_after_then_succes": func(_ context.Context, _ context.CancelFunc, call int) error { return retryAfterOnce(call) },
	}
	type result struct {
		calls    int
		ok       bool
		outcome  retry.Outcome
		attempts int
		last     error
		cause    error
	}
	run := func(t *testing.T, fn func(context.Context, context.CancelFunc, int) error, opts ...retry.Option) result {
		var got result
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			r := mustNew(t, append([]retry.Option{retry.WithMaxAttempts(4)}, opts...)...)
			err := r.Do(ctx, func(ctx context.Context) error {
				got.calls++
				return fn(ctx, cancel, got.calls)
			})
			if err == nil {
				got.ok = true
				return
			}
			var re *retry.Error
			require.ErrorAs(t, err, &re)
			got.outcome, got.attempts, got.last, got.cause = re.Outcome, re.Attempts, re.Last, re.Cause
		})
		return got
	}
	for name, fn := range cases {
		t.Run(name, func(t *testing.T) {
			viaLoop := run(t, fn, retry.WithObserver(&recorder{}))
			shortcut := run(t, fn)
			assert.Equal(t, viaLoop, shortcut)
		})
	}
}

func failUntil(call, n int) error {
	if call < n {
		return errTransient
	}
	return nil
}

func cancelOn(call, n int, cancel context.CancelFunc) error {
	if call == n {
		cancel()
	}
	return errTransient
}

func retryAfterOnce(call int) error {
	if call == 1 {
		return retry.RetryAfter(errTransient, 0)
	}
	return nil
}
