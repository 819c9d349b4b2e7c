// Command flaky shows retry at work on a simulated flaky service: it needs
// no network and no configuration. Run it with
//
//	go run ./examples/flaky
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

func main() {
	dir, err := os.MkdirTemp("", "retry-demo-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "flaky:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	if err := run(context.Background(), os.Stdout, rand.NewPCG(1, 2), filepath.Join(dir, "deadletters.jsonl")); err != nil {
		fmt.Fprintln(os.Stderr, "flaky:", err)
		os.Exit(1)
	}
}

// service simulates a downstream API that fails its first failures calls.
type service struct {
	calls    int
	failures int
	fail     func(call int) error
}

func (s *service) call(context.Context) error {
	s.calls++
	if s.calls <= s.failures {
		return s.fail(s.calls)
	}
	return nil
}

var errUnavailable = errors.New("503 service unavailable")

// logAttempts prints every attempt and wait of a call.
type logAttempts struct{ w io.Writer }

func (l logAttempts) OnAttemptStart(context.Context, retry.AttemptStart) {}
func (l logAttempts) OnAttemptEnd(_ context.Context, e retry.AttemptEnd) {
	result := "ok"
	if e.Err != nil {
		result = e.Err.Error()
	}
	fmt.Fprintf(l.w, "  attempt %d: %s\n", e.Attempt, result)
}
func (l logAttempts) OnRetry(_ context.Context, e retry.Scheduled) {
	fmt.Fprintf(l.w, "  waiting %v\n", e.Delay.Round(time.Millisecond))
}
func (l logAttempts) OnWaitEnd(context.Context, retry.WaitEnd) {} // OnRetry printed the wait
func (l logAttempts) OnDone(_ context.Context, e retry.Done) {
	fmt.Fprintf(l.w, "  => %s, attempts: %d\n", e.Outcome, e.Attempts)
}

func run(ctx context.Context, w io.Writer, src rand.Source, deadLetterPath string) error {
	// One Retrier for the whole program: the defaults (3 attempts,
	// exponential backoff from 100ms up to 10s with full jitter, a
	// server's Retry-After capped at 30s) plus a random source fixed for a
	// repeatable demo and a printer.
	r, err := retry.New(retry.WithRandom(src), retry.WithObserver(logAttempts{w}))
	if err != nil {
		return err
	}

	fmt.Fprintln(w, "1. A transient failure is retried:")
	flaky := &service{failures: 2, fail: func(int) error { return errUnavailable }}
	fmt.Fprintln(w, "  error:", r.Do(ctx, flaky.call))

	fmt.Fprintln(w, "2. A server's Retry-After replaces the backoff:")
	limited := &service{failures: 1, fail: func(int) error {
		return retry.After(errors.New("429 too many requests"), 250*time.Millisecond)
	}}
	fmt.Fprintln(w, "  error:", r.Do(ctx, limited.call))

	fmt.Fprintln(w, "3. A permanent error stops at once:")
	missing := &service{failures: 5, fail: func(int) error { return retry.Permanent(errors.New("404 not found")) }}
	fmt.Fprintln(w, "  error:", r.Do(ctx, missing.call))

	fmt.Fprintln(w, "4. A service that stays down exhausts the attempts; the error keeps the last failure:")
	down := &service{failures: 10, fail: func(n int) error { return fmt.Errorf("call %d: %w", n, errUnavailable) }}
	err = r.Do(ctx, down.call)
	fmt.Fprintln(w, "  error:", err)
	fmt.Fprintln(w, "  errors.Is(err, retry.ErrExhausted):", errors.Is(err, retry.ErrExhausted), "| errors.Is(err, errUnavailable):", errors.Is(err, errUnavailable))

	fmt.Fprintln(w, "5. A wait that would outlive the deadline is not started:")
	slow, err := r.With(retry.WithBackoff(retry.Constant(time.Second)), retry.WithJitter(retry.NoJitter))
	if err != nil {
		return err
	}
	deadlineCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = slow.Do(deadlineCtx, (&service{failures: 10, fail: func(int) error { return errUnavailable }}).call)
	fmt.Fprintf(w, "  error: %v\n  returned after %v, not at the 300ms deadline\n", err, time.Since(start).Round(time.Millisecond))

	return deadLetters(ctx, w, r, deadLetterPath)
}

// deadLetters shows that failed work is recorded, not dropped, and replayed
// once the service is back.
func deadLetters(ctx context.Context, w io.Writer, r *retry.Retrier, path string) error {
	fmt.Fprintln(w, "6. Work that gives up is dead-lettered to a JSON Lines file, then redriven:")
	sink, err := deadletter.OpenFile(path, nil)
	if err != nil {
		return err
	}
	defer sink.Close()
	invoices, err := r.With(retry.WithDeadLetter(sink, nil), retry.WithName("send-invoice"),
		retry.WithPayload([]byte(`{"invoice":42}`)), retry.WithBackoff(retry.Constant(0)))
	if err != nil {
		return err
	}
	down := &service{failures: 10, fail: func(int) error { return errUnavailable }}
	fmt.Fprintln(w, "  error:", invoices.Do(ctx, down.call))

	records, err := sink.List(ctx, deadletter.Filter{})
	if err != nil {
		return err
	}
	for _, dl := range records {
		fmt.Fprintf(w, "  dead letter: name=%s reason=%s attempts=%d payload=%s last error=%q\n",
			dl.Name, dl.Reason, dl.Attempts, dl.Payload, dl.LastError)
	}

	fmt.Fprintln(w, "  the service is back; redriving:")
	report, err := deadletter.Redrive(ctx, sink, r, func(ctx context.Context, dl retry.DeadLetter) error {
		fmt.Fprintf(w, "  replaying %s with payload %s\n", dl.Name, dl.Payload)
		return nil
	}, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  redrive: %d pending, %d succeeded\n", report.Pending, report.Succeeded)
	again, err := deadletter.Redrive(ctx, sink, r, func(context.Context, retry.DeadLetter) error { return nil }, nil)
	fmt.Fprintf(w, "  a second redrive finds %d pending: nothing is replayed twice\n", again.Pending)
	return err
}
