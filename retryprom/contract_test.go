package retryprom_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/observertest"
	"github.com/steadfast-go/retry/retryprom"
)

// The Prometheus observer keeps the contract Do relies on.
func TestObserver_keepsTheObserverContract(t *testing.T) {
	observertest.TestObserver(t, func(t *testing.T) retry.Observer {
		obs, err := retryprom.New(prometheus.NewRegistry(), retryprom.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return obs
	})
}
