package redisstore_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/redisstore"
)

// Charging a card at most once across every process that shares Redis.
// (Not run by go test: it needs a server.)
func Example() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379",
		ContextTimeoutEnabled: true, // so that WithIdempotencyStoreTimeout bounds each call
	})
	defer client.Close()
	store, err := redisstore.New(client, &redisstore.Options{Prefix: "payments:idem:"})
	if err != nil {
		panic(err)
	}
	r, err := retry.New(retry.WithIdempotency(store, nil)) // one Retrier, shared
	if err != nil {
		panic(err)
	}

	ctx := retry.ContextWithIdempotencyKey(context.Background(), "charge:order-42")
	receipt, err := retry.DoValueOn(ctx, r, func(ctx context.Context) (string, error) {
		return "receipt-1", nil // the call to the payment provider
	})
	fmt.Println(receipt, err)
}
