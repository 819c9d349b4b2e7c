package overload_test

import (
	"testing"
	"time"

	"github.com/steadfast-go/retry/overload"
	"github.com/steadfast-go/retry/overloadtest"
)

// The library's budgets keep the contract Do relies on.
func TestRatio_keepsTheBudgetContract(t *testing.T) {
	overloadtest.TestBudget(t, func(t *testing.T) overload.Budget {
		b, err := overload.NewRatio(overload.RatioOptions{MaxWaiting: 4})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

func TestTokenBucket_keepsTheBudgetContract(t *testing.T) {
	overloadtest.TestBudget(t, func(t *testing.T) overload.Budget {
		b, err := overload.NewTokenBucket(overload.TokenBucketOptions{MaxTokens: 10, MaxWaiting: 4})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// The library's limit keeps the contract Do relies on, with its queue.
func TestAdaptive_keepsTheLimitContract(t *testing.T) {
	overloadtest.TestLimit(t, func(t *testing.T) overload.Limit {
		l, err := overload.NewAdaptive(overload.AdaptiveOptions{Initial: 4, Min: 2, Max: 8, MaxQueued: 4, QueueTimeout: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}
