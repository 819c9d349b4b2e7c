package retrytest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrytest"
)

// With [retry.WithAttemptTimeout], an attempt whose server hangs ends
// only when the clock passes the attempt's own deadline, and Do arms no
// wait for that: Armed says nothing until the attempt has timed out. So
// the test waits until the attempt has started (its deadline is on the
// mock by then), advances the clock by the attempt timeout itself, and
// then advances it by each wait that arrives on Armed, as before.
func Example_attemptTimeout() {
	clk := retrytest.NewClock()
	r, _ := retry.New(
		retry.WithClock(clk),
		retry.WithAttemptTimeout(2*time.Second),
		retry.WithBackoff(retry.Constant(time.Second)),
		retry.WithJitter(retry.NoJitter),
	)

	started := make(chan struct{})
	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- r.Do(context.Background(), func(ctx context.Context) error {
			calls++
			if calls == 1 {
				close(started) // the attempt's deadline is on the mock now
				<-ctx.Done()   // the server hangs
				return ctx.Err()
			}
			return nil
		})
	}()

	<-started
	fmt.Println("advancing 2s, the attempt timeout")
	clk.Add(2 * time.Second)
	d := <-clk.Armed() // the timed-out attempt is retried after the backoff
	fmt.Println("advancing", d)
	clk.Add(d)
	fmt.Println(<-done, calls)
	// Output:
	// advancing 2s, the attempt timeout
	// advancing 1s
	// <nil> 2
}
