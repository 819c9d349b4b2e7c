package adapter_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/internal/adapter"
)

func TestTable_bounds(t *testing.T) {
	t.Parallel()
	var made []string
	tab := adapter.NewTable(3, func(label string) string { made = append(made, label); return label })
	got := map[string]string{}
	for _, name := range []string{"a", "", "\xff", "b", "c", "a", "other"} {
		got[name] = tab.Get(name)
	}
	assert.Equal(t, map[string]string{
		"a": "a", "": "unnamed", "\xff": "other", "b": "other", "c": "other", "other": "other",
	}, got)
	assert.Equal(t, []string{"a", "unnamed", "other"}, made, "each value made once")
}

func TestTable_concurrent(t *testing.T) {
	t.Parallel()
	const limit = 10
	var made atomic.Int32
	tab := adapter.NewTable(limit, func(label string) *string { made.Add(1); return &label })
	var wg sync.WaitGroup
	results := make([]map[string]*string, 8)
	for g := range results {
		results[g] = map[string]*string{}
		wg.Go(func() {
			for i := range 1000 {
				name := fmt.Sprintf("op-%d", (i*7+g)%40)
				results[g][name] = tab.Get(name)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(limit+1), made.Load(), "limit names and other")
	labels := map[string]bool{}
	for _, r := range results {
		for name, v := range r {
			labels[*v] = true
			// Every goroutine got the same value for the same name.
			assert.Same(t, results[0][name], v, name)
		}
	}
	assert.Len(t, labels, limit+1)
}

func TestDurationBuckets(t *testing.T) {
	t.Parallel()
	def, err := adapter.DurationBuckets("x", nil)
	require.NoError(t, err)
	assert.Len(t, def, 14)
	custom := []float64{1, 2}
	got, err := adapter.DurationBuckets("x", custom)
	require.NoError(t, err)
	custom[0] = 0
	assert.Equal(t, []float64{1, 2}, got, "a copy")
	for _, bad := range [][]float64{{}, {1, 1}, {2, 1}} {
		_, err := adapter.DurationBuckets("pkg.New", bad)
		assert.ErrorIs(t, err, retry.ErrInvalidOption)
		assert.ErrorContains(t, err, "pkg.New: DurationBuckets")
	}
}

func TestLimit(t *testing.T) {
	t.Parallel()
	n, err := adapter.Limit("x", 0, 100)
	require.NoError(t, err)
	assert.Equal(t, 100, n)
	n, err = adapter.Limit("x", 3, 100)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	_, err = adapter.Limit("pkg.New", -1, 100)
	assert.ErrorIs(t, err, retry.ErrInvalidOption)
	assert.ErrorContains(t, err, "pkg.New: MaxOperations -1 is negative")
}

func TestOutcomeIndex(t *testing.T) {
	t.Parallel()
	labels := adapter.Outcomes()
	for o := retry.OutcomeSuccess; o <= retry.OutcomeCanceled; o++ {
		i := adapter.OutcomeIndex(o)
		require.GreaterOrEqual(t, i, 0)
		assert.Equal(t, o.String(), labels[i])
	}
	assert.Equal(t, -1, adapter.OutcomeIndex(retry.Outcome(200)))
	assert.Equal(t, adapter.BudgetDenied, labels[len(labels)-1])
}
