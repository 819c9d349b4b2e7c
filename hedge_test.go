package retry_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
)

func TestWithHedge_refusesBadSettings(t *testing.T) {
	for _, tc := range []struct {
		o    retry.HedgeOptions
		want string
	}{
		{retry.HedgeOptions{Delay: -time.Millisecond}, "HedgeOptions.Delay (-1ms) must not be negative"},
		{retry.HedgeOptions{MinDelay: -1}, "HedgeOptions.MinDelay (-1ns) must not be negative"},
		{retry.HedgeOptions{Percentile: 1}, "HedgeOptions.Percentile (1) must be in (0, 1)"},
		{retry.HedgeOptions{Percentile: -0.5}, "HedgeOptions.Percentile (-0.5) must be in (0, 1)"},
		{retry.HedgeOptions{Percentile: math.NaN()}, "HedgeOptions.Percentile (NaN) must be in (0, 1)"},
		{retry.HedgeOptions{Window: 9}, "HedgeOptions.Window (9) must be in [10, 1000000]"},
		{retry.HedgeOptions{Window: 2e6}, "HedgeOptions.Window (2000000) must be in [10, 1000000]"},
		// Every field is checked, whether Delay is given or not.
		{retry.HedgeOptions{Delay: time.Millisecond, Percentile: 2}, "HedgeOptions.Percentile (2) must be in (0, 1)"},
		{retry.HedgeOptions{Delay: time.Millisecond, Window: 9}, "HedgeOptions.Window (9) must be in [10, 1000000]"},
	} {
		_, err := retry.New(retry.WithHedge(&tc.o))
		require.ErrorIs(t, err, retry.ErrInvalidOption)
		assert.ErrorContains(t, err, tc.want)
	}
}

func TestWithHedge_nilMeansTheDefaults(t *testing.T) {
	r, err := retry.New(retry.WithHedge(nil))
	require.NoError(t, err)
	assert.True(t, r.Hedges())
	derived, err := r.With(retry.WithName("reads"))
	require.NoError(t, err)
	assert.True(t, derived.Hedges(), "With keeps the setting")
}
