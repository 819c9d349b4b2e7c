package retry_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/memstore"
)

func ExampleWithIdempotency() {
	store := memstore.New(nil) // shared by every caller in the process
	r, err := retry.New(
		retry.WithIdempotency(store, nil), // each call brings its key in its context
		retry.WithBackoff(retry.Constant(0)),
	)
	if err != nil {
		panic(err)
	}

	calls := 0
	charge := func(ctx context.Context) (string, error) {
		calls++
		if calls == 1 {
			return "", errors.New("connection reset") // retried under the same claim
		}
		return fmt.Sprintf("receipt-%d", calls), nil
	}

	// Scope keys by operation, so that "refund:order-42" is another key.
	ctx := retry.ContextWithIdempotencyKey(context.Background(), "charge:order-42")
	for range 2 {
		receipt, err := retry.DoValueOn(ctx, r, charge)
		fmt.Println(receipt, err)
	}
	fmt.Println("calls of fn:", calls)

	other, _ := r.With(retry.WithPayload([]byte(`{"amount":99}`)))
	_, err = retry.DoValueOn(ctx, other, charge)
	fmt.Println(errors.Is(err, retry.ErrKeyReuse))
	// Output:
	// receipt-2 <nil>
	// receipt-2 <nil>
	// calls of fn: 2
	// true
}
