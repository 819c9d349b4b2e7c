//go:build !race

// Allocation counts differ under -race, so these tests run without it.

package retry_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

// TestDeadLetterSuccessAllocatesNothing: with a sink configured, a call
// that succeeds at once still makes no allocation.
func TestDeadLetterSuccessAllocatesNothing(t *testing.T) {
	r, err := retry.New(retry.WithDeadLetter(deadletter.NewMemorySink(), nil))
	require.NoError(t, err)
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = r.Do(ctx, fn) }))
}
