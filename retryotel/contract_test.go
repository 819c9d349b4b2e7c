package retryotel_test

import (
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/observertest"
	"github.com/steadfast-go/retry/retryotel"
)

// The OpenTelemetry observer keeps the contract Do relies on.
func TestObserver_keepsTheObserverContract(t *testing.T) {
	observertest.TestObserver(t, func(t *testing.T) retry.Observer {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		obs, err := retryotel.New(mp, retryotel.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return obs
	})
}
