package benchmarks

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPeers_allocsPerCall pins the heap allocations of one call on the
// benchmark setups, measured with testing.AllocsPerRun (the same figures
// as -benchmem, and also under -race). Speed is only in the benchmarks.
func TestPeers_allocsPerCall(t *testing.T) {
	firstTry := map[string]float64{
		"Direct":                 0,
		"Steadfast/Retrier":      0,
		"Steadfast/PackageDo":    1, // Exponential boxed into the Backoff interface (24 B); Do itself allocates nothing
		"CenkaltiBackoffV5":      3,
		"AvastV5/Prebuilt":       0, // context fixed at New
		"AvastV5/PerCallContext": 4,
		"SethvargoGoRetry":       3,
		"FailsafeGo":             16,
		"EapacheGoResiliency":    0, // a shared Retrier
	}
	threeFailures := map[string]float64{
		"HandLoop":            0,
		"Steadfast/Retrier":   0, // a zero wait arms no timer
		"CenkaltiBackoffV5":   12,
		"AvastV5/Prebuilt":    12,
		"SethvargoGoRetry":    17,
		"FailsafeGo":          34,
		"EapacheGoResiliency": 9, // a time.NewTimer per retry, even of 0
	}
	measure := func(t *testing.T, s setup, fn op) float64 {
		call := s.build()
		ctx := context.Background()
		return testing.AllocsPerRun(100, func() {
			if err := call(ctx, fn); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, s := range firstTrySetups {
		t.Run("FirstTry/"+s.name, func(t *testing.T) {
			assert.Equal(t, firstTry[s.name], measure(t, s, succeed))
		})
	}
	for _, s := range zeroWaitSetups {
		t.Run("ThreeFailures/"+s.name, func(t *testing.T) {
			assert.Equal(t, threeFailures[s.name], measure(t, s, failThenSucceed(3)))
		})
	}
}
