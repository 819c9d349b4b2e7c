package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
)

// The store keeps a completed key for the retention, on its own clock.
func ExampleNew() {
	clk := clock.NewMock()
	store := memstore.New(&memstore.Options{Clock: clk})
	r, err := retry.New(retry.WithIdempotency(store, &retry.IdempotencyOptions{Key: "charge:order-42", Retention: time.Hour}))
	if err != nil {
		panic(err)
	}
	calls := 0
	charge := func(context.Context) error { calls++; return nil }

	_ = r.Do(context.Background(), charge)
	_ = r.Do(context.Background(), charge) // replayed: fn is not called
	fmt.Println("calls:", calls, "keys:", store.Len())

	clk.Add(2 * time.Hour) // the record expired
	_ = r.Do(context.Background(), charge)
	fmt.Println("calls:", calls)
	// Output:
	// calls: 1 keys: 1
	// calls: 2
}
