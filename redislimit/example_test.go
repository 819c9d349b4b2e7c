package redislimit_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/redislimit"
)

// 100 attempts a second to a payments API per merchant, shared by the 4
// processes of a service, and the API's pauses shared too. Give the rate
// and the pause to every Retrier that calls the API (OverloadOptions);
// each attempt then asks the rate, as below. (Not run by go test: it
// needs a server.)
func Example() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379",
		ContextTimeoutEnabled: true, // so that Timeout bounds each round trip
	})
	defer client.Close()
	rate, err := redislimit.NewRate(client, &redislimit.RateOptions{
		Key:         "payments-api",
		PerSecond:   100,
		Partitioned: true,
		FleetSize:   4, // while Redis is down, each process admits 25/s
	})
	if err != nil {
		panic(err)
	}

	share, err := redislimit.NewPauseShare(client, &redislimit.PauseShareOptions{Channel: "payments-api:pause"})
	if err != nil {
		panic(err)
	}
	defer share.Close()
	pause, err := overload.NewPause(overload.PauseOptions{Partitioned: true, OnPause: share.Publish})
	if err != nil {
		panic(err)
	}
	if err := share.Start(pause); err != nil {
		panic(err)
	}

	ctx := overload.WithPartition(context.Background(), "merchant-42")
	err = rate.Admit(ctx, overload.Attempt{Kind: overload.FirstAttempt})
	fmt.Println(err == nil || errors.Is(err, overload.ErrRateLimited), pause.Hold(ctx, nil))
}
