package retrymetrics_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrymetrics"
)

// gauges is an Observer that keeps the two gauges by the shared rule.
type gauges struct{ inFlight, waiting atomic.Int64 }

func (g *gauges) add(d retrymetrics.GaugeDelta) {
	g.inFlight.Add(int64(d.InFlight))
	g.waiting.Add(int64(d.Waiting))
}

func (g *gauges) OnAttemptStart(_ context.Context, e retry.AttemptStart) {
	g.add(retrymetrics.OnAttemptStart(e.Attempt, e.Wait))
}
func (g *gauges) OnAttemptEnd(context.Context, retry.AttemptEnd) {}
func (g *gauges) OnRetry(_ context.Context, e retry.Scheduled) {
	g.add(retrymetrics.OnRetry(e.Delay))
}
func (g *gauges) OnDone(_ context.Context, e retry.Done) {
	g.add(retrymetrics.OnDone(e.Attempts, e.Waited))
}

func ExampleGaugeDelta() {
	g := &gauges{}
	ctx := context.Background()
	// What Do reports for a call whose first attempt fails and which is
	// cancelled during the 1s wait that follows.
	g.OnAttemptStart(ctx, retry.AttemptStart{Name: "charge-card", Attempt: 1})
	fmt.Println("attempt 1:", g.inFlight.Load(), g.waiting.Load())
	g.OnRetry(ctx, retry.Scheduled{Name: "charge-card", Attempt: 1, Delay: time.Second})
	fmt.Println("waiting:", g.inFlight.Load(), g.waiting.Load())
	g.OnDone(ctx, retry.Done{Name: "charge-card", Outcome: retry.OutcomeCanceled, Attempts: 1, Waited: true})
	fmt.Println("done:", g.inFlight.Load(), g.waiting.Load())

	// A real call that fails twice, then succeeds, without waits.
	_ = retry.Do(ctx, flaky(3), retry.WithObserver(g), retry.WithBackoff(retry.Constant(0)))
	fmt.Println("after Do:", g.inFlight.Load(), g.waiting.Load())
	// Output:
	// attempt 1: 1 0
	// waiting: 1 1
	// done: 0 0
	// after Do: 0 0
}

// flaky returns a function that fails n-1 times, then succeeds.
func flaky(n int) func(context.Context) error {
	return func(context.Context) error {
		if n--; n > 0 {
			return errors.New("connection refused")
		}
		return nil
	}
}

func ExampleNewTable() {
	series, err := retrymetrics.NewTable(2, func(label string) string { return "series of " + label })
	if err != nil {
		panic(err)
	}
	for _, name := range []string{"charge-card", "", "refund", "charge-card"} {
		fmt.Println(series.Get(name))
	}
	// Output:
	// series of charge-card
	// series of unnamed
	// series of other
	// series of charge-card
}
