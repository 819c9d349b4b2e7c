package retrymetrics_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry/retrymetrics"
)

func TestTable_bounds(t *testing.T) {
	t.Parallel()
	var made []string
	tab, err := retrymetrics.NewTable(3, func(label string) string { made = append(made, label); return label })
	require.NoError(t, err)
	got := map[string]string{}
	for _, name := range []string{"a", "", "\xff", "b", "c", "a", "other"} {
		got[name] = tab.Get(name)
	}
	assert.Equal(t, map[string]string{
		"a": "a", "": "unnamed", "\xff": "other", "b": "other", "c": "other", "other": "other",
	}, got)
	assert.Equal(t, []string{"a", "unnamed", "other"}, made, "each value made once")
}

// TestTable_longNames: a name longer than MaxNameLen bytes gets Other's
// value, and is neither kept nor counted toward the limit.
func TestTable_longNames(t *testing.T) {
	t.Parallel()
	var made []string
	tab, err := retrymetrics.NewTable(2, func(label string) string { made = append(made, label); return label })
	require.NoError(t, err)
	// get shortens what it returns, so that a failure prints no 1 MiB label.
	get := func(name string) string {
		v := tab.Get(name)
		if len(v) > retrymetrics.MaxNameLen {
			return fmt.Sprintf("%.10s... (%d bytes)", v, len(v))
		}
		return v
	}
	longest := strings.Repeat("x", retrymetrics.MaxNameLen)
	tooLong := longest + "y"
	huge := strings.Repeat("z", 1<<20)
	assert.Equal(t, retrymetrics.Other, get(tooLong))
	assert.Equal(t, retrymetrics.Other, get(huge))
	assert.Equal(t, retrymetrics.Other, get(tooLong), "the same value again")
	assert.Equal(t, longest, get(longest), "MaxNameLen bytes is still a name")
	assert.Equal(t, "a", get("a"), "long names left the limit to the names that fit")
	assert.Equal(t, retrymetrics.Other, get("b"), "past the limit")
	assert.Equal(t, []string{retrymetrics.Other, longest, "a"}, made, "each value made once")
	assert.Equal(t, 128, retrymetrics.MaxNameLen, "the documented limit")
}

func TestTable_concurrent(t *testing.T) {
	t.Parallel()
	const limit = 10
	var made atomic.Int32
	tab, err := retrymetrics.NewTable(limit, func(label string) *string { made.Add(1); return &label })
	require.NoError(t, err)
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

func TestNewTable_limit(t *testing.T) {
	t.Parallel()
	label := func(l string) string { return l }
	tab, err := retrymetrics.NewTable(0, label)
	require.NoError(t, err)
	for i := range retrymetrics.DefaultMaxOperations {
		require.Equal(t, fmt.Sprint(i), tab.Get(fmt.Sprint(i)))
	}
	assert.Equal(t, retrymetrics.Other, tab.Get("one too many"), "0 means DefaultMaxOperations")

	_, err = retrymetrics.NewTable(-1, label)
	assert.EqualError(t, err, "MaxOperations -1 is negative")
	_, err = retrymetrics.NewTable[string](1, nil)
	assert.ErrorContains(t, err, "is nil")
}
