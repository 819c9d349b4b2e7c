package retrymetrics_test

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry/retrymetrics"
)

type provider interface{ Meter() }

type impl struct{}

func (*impl) Meter() {}

type funcProvider func()

func (funcProvider) Meter() {}

// TestPrepare: the checks that retryprom's and retryotel's New begin
// with, in their order, with the words they report.
func TestPrepare(t *testing.T) {
	t.Parallel()
	mk := func(label string) string { return "v:" + label }
	var nilIface provider
	cases := []struct {
		name string
		s    retrymetrics.Setup
		want string
	}{
		{"nil", retrymetrics.Setup{On: nilIface, OnName: "the registerer"}, "the registerer is nil"},
		{"nil pointer", retrymetrics.Setup{On: provider((*impl)(nil)), OnName: "the registerer"}, "the registerer is nil (a nil *retrymetrics_test.impl)"},
		{"nil func", retrymetrics.Setup{On: provider(funcProvider(nil)), OnName: "the provider"}, "the provider is nil (a nil retrymetrics_test.funcProvider)"},
		{"hint", retrymetrics.Setup{OnName: "the meter provider", OnHint: "pass otel.GetMeterProvider() for the global one"},
			"the meter provider is nil; pass otel.GetMeterProvider() for the global one"},
		{"hint after the type", retrymetrics.Setup{On: (*impl)(nil), OnName: "the meter provider", OnHint: "pass one"},
			"the meter provider is nil (a nil *retrymetrics_test.impl); pass one"},
		{"no name", retrymetrics.Setup{}, "the argument is nil"},
		{"nil first", retrymetrics.Setup{OnName: "the registerer", MaxOperations: -1}, "the registerer is nil"},
		{"negative max", retrymetrics.Setup{On: &impl{}, MaxOperations: -1, DurationBuckets: []float64{}}, "MaxOperations -1 is negative"},
		{"buckets", retrymetrics.Setup{On: &impl{}, DurationBuckets: []float64{math.NaN()}}, "DurationBuckets [NaN]: bound 0 is NaN"},
	}
	for _, tc := range cases {
		ops, buckets, err := retrymetrics.Prepare(tc.s, mk)
		require.Error(t, err, tc.name)
		assert.Equal(t, tc.want, err.Error()[:min(len(err.Error()), len(tc.want))], tc.name)
		assert.Nil(t, ops, tc.name)
		assert.Nil(t, buckets, tc.name)
	}

	_, _, err := retrymetrics.Prepare[string](retrymetrics.Setup{On: &impl{}}, nil)
	assert.ErrorContains(t, err, "the function that makes a Table's values is nil")

	// A nil map, slice or chan may well have working methods.
	ops, buckets, err := retrymetrics.Prepare(retrymetrics.Setup{On: map[string]int(nil), MaxOperations: 1, DurationBuckets: []float64{1, 2}}, mk)
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 2}, buckets)
	assert.Equal(t, "v:a", ops.Get("a"))
	assert.Equal(t, "v:other", ops.Get("b"), "MaxOperations is the table's")
	_, buckets, err = retrymetrics.Prepare(retrymetrics.Setup{On: &impl{}}, mk)
	require.NoError(t, err)
	want, err := retrymetrics.DurationBuckets(nil)
	require.NoError(t, err)
	assert.Equal(t, want, buckets, "the default buckets")
}

// TestCheckNotNil: a nil interface, pointer or func is nil; a nil map,
// slice or chan is not, as its methods may well work.
func TestCheckNotNil(t *testing.T) {
	t.Parallel()
	var nilIface provider
	assert.EqualError(t, retrymetrics.CheckNotNil(nilIface, "the meter provider", ""), "the meter provider is nil")
	assert.EqualError(t, retrymetrics.CheckNotNil(provider((*impl)(nil)), "the meter provider", "pass one"),
		"the meter provider is nil (a nil *retrymetrics_test.impl); pass one")
	assert.EqualError(t, retrymetrics.CheckNotNil(funcProvider(nil), "the provider", ""), "the provider is nil (a nil retrymetrics_test.funcProvider)")
	assert.NoError(t, retrymetrics.CheckNotNil(&impl{}, "the provider", ""))
	assert.NoError(t, retrymetrics.CheckNotNil(map[string]int(nil), "the provider", ""))
}

// TestCheckLimit: the checks of retryprom's NewLimitCollector and
// retryotel's RegisterLimit, with the words they report; none repeats
// the name.
func TestCheckLimit(t *testing.T) {
	t.Parallel()
	longest := strings.Repeat("x", retrymetrics.MaxNameLen)
	var nilIface provider
	cases := []struct {
		name       string
		downstream string
		limit      any
		want       string
	}{
		{"empty name", "", &impl{}, "the downstream's name is empty"},
		{"long name", longest + "y", &impl{}, "the downstream's name is 129 bytes, longer than 128"},
		{"not UTF-8", "payments\xff", &impl{}, "the downstream's name is not valid UTF-8"},
		{"nil", "payments", nilIface, "the limit is nil"},
		{"nil pointer", "payments", provider((*impl)(nil)), "the limit is nil (a nil *retrymetrics_test.impl)"},
		{"name first", "", nil, "the downstream's name is empty"},
	}
	for _, tc := range cases {
		err := retrymetrics.CheckLimit(tc.downstream, tc.limit)
		assert.EqualError(t, err, tc.want, tc.name)
	}
	assert.NoError(t, retrymetrics.CheckLimit(longest, &impl{}))
	assert.NoError(t, retrymetrics.CheckLimit("é", map[string]int(nil)), "a nil map may well have working methods")
}
