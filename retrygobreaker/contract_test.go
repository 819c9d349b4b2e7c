package retrygobreaker_test

import (
	"testing"

	"github.com/sony/gobreaker/v2"

	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/overloadtest"
	"github.com/steadfast-go/retry/retrygobreaker"
)

// The adapter keeps the contract Do relies on, closed and tripping alike:
// ReadyToTrip opens it after 5 failures in a row.
func TestBreaker_keepsTheBreakerContract(t *testing.T) {
	overloadtest.TestBreaker(t, func(t *testing.T) overload.Breaker {
		b, err := retrygobreaker.NewBreaker(gobreaker.Settings{
			Name:        "contract",
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 5 },
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
