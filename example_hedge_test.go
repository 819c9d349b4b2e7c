package retry_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/steadfast-go/retry"
)

// A read whose first attempt hangs: after the delay a hedge starts beside
// it and answers, and the first attempt's context ends with ErrHedgeLost.
func ExampleHedgeValue() {
	r, err := retry.New(retry.WithHedge(&retry.HedgeOptions{Delay: time.Millisecond}))
	if err != nil {
		fmt.Println(err)
		return
	}
	var attempts atomic.Int32
	lost := make(chan error, 1)
	name, err := retry.HedgeValue(context.Background(), r, func(ctx context.Context) (string, error) {
		if attempts.Add(1) == 1 {
			<-ctx.Done() // a replica that hangs
			lost <- context.Cause(ctx)
			return "", ctx.Err()
		}
		return "Ada", nil
	})
	fmt.Println(name, err)
	fmt.Println(errors.Is(<-lost, retry.ErrHedgeLost))
	// Output:
	// Ada <nil>
	// true
}
