package overload_test

import (
	"testing"

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
