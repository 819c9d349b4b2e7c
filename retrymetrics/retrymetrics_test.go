package retrymetrics_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/retrymetrics"
)

func TestBuckets(t *testing.T) {
	t.Parallel()
	assert.Equal(t, [8]int{1, 2, 3, 4, 5, 10, 100, 1000}, retrymetrics.AttemptBounds())
	assert.Equal(t, []float64{1, 2, 3, 4, 5, 10, 100, 1000}, retrymetrics.AttemptBuckets())
	assert.Equal(t, time.Millisecond, retrymetrics.DurationBounds()[0])
	assert.Equal(t, time.Minute, retrymetrics.DurationBounds()[13])

	def, err := retrymetrics.DurationBuckets(nil)
	require.NoError(t, err)
	assert.Equal(t, []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}, def,
		"the default is DurationBounds in seconds")
	def[0] = 99
	again, err := retrymetrics.DurationBuckets(nil)
	require.NoError(t, err)
	assert.Equal(t, 0.001, again[0], "a new slice each time")

	custom := []float64{1, 2}
	got, err := retrymetrics.DurationBuckets(custom)
	require.NoError(t, err)
	custom[0] = 0
	assert.Equal(t, []float64{1, 2}, got, "a copy")
	for _, bad := range [][]float64{{}, {1, 1}, {2, 1}} {
		_, err := retrymetrics.DurationBuckets(bad)
		assert.ErrorContains(t, err, "DurationBuckets", "%v", bad)
		assert.ErrorContains(t, err, "must be one or more increasing bounds", "%v", bad)
	}
	// One bound makes no comparison, so it must be checked by itself.
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		bad  []float64
		want string
	}{
		{[]float64{nan}, "DurationBuckets [NaN]: bound 0 is NaN; bounds must be finite"},
		{[]float64{inf}, "DurationBuckets [+Inf]: bound 0 is +Inf; bounds must be finite"},
		{[]float64{-inf}, "DurationBuckets [-Inf]: bound 0 is -Inf; bounds must be finite"},
		{[]float64{1, inf}, "DurationBuckets [1 +Inf]: bound 1 is +Inf; bounds must be finite (the +Inf bucket is added by itself)"},
		{[]float64{-inf, 1}, "bound 0 is -Inf"},
		{[]float64{1, nan, 2}, "bound 1 is NaN"},
	} {
		got, err := retrymetrics.DurationBuckets(tc.bad)
		assert.Nil(t, got, "%v", tc.bad)
		assert.ErrorContains(t, err, tc.want, "%v", tc.bad)
	}
}

func TestOutcomeLabels(t *testing.T) {
	t.Parallel()
	labels := retrymetrics.OutcomeLabels(retry.OutcomeRefused)
	assert.Equal(t, []string{"success", "permanent", "exhausted", "max-elapsed", "deadline", "canceled", "refused"}, labels)
	for o := retry.OutcomeSuccess; o <= retry.OutcomeRefused; o++ {
		assert.Equal(t, o.String(), labels[o])
	}
	assert.Equal(t, []string{"success"}, retrymetrics.OutcomeLabels(retry.OutcomeSuccess))
}
