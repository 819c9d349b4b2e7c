package parkcost_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry/retrytest/parkcost"
)

// parkedCall parks on ctx, marks itself parked, and returns ret(ctx).
func parkedCall(parked *sync.WaitGroup, ret func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		parked.Done()
		<-ctx.Done()
		return ret(ctx)
	}
}

func TestMeasure_countsEachParkedGoroutinesStack(t *testing.T) {
	const n = 1000
	var parked sync.WaitGroup
	parked.Add(n)
	c, err := parkcost.Measure(n, parkedCall(&parked, context.Cause), parked.Wait)
	require.NoError(t, err)
	// Each goroutine has a stack of its own, at least the runtime's
	// smallest, 2 KB (a few may share a span the GC keeps anyway).
	assert.Greater(t, c.Stack, 1500.0)
	assert.Equal(t, c.Heap+c.Stack, c.Total())
	assert.Positive(t, c.StartStack)
}

func TestMeasure_failsWhenACallReturnsNil(t *testing.T) {
	const n = 10
	var parked sync.WaitGroup
	parked.Add(n)
	var once sync.Once
	ret := func(ctx context.Context) error {
		var err error = errors.New("cancelled")
		once.Do(func() { err = nil })
		return err
	}
	_, err := parkcost.Measure(n, parkedCall(&parked, ret), parked.Wait)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "9 of 10 calls returned an error")
}
