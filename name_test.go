package retry_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
)

func TestRetrierName(t *testing.T) {
	var nilRetrier *retry.Retrier
	assert.Equal(t, "", nilRetrier.Name())
	assert.Equal(t, "", (&retry.Retrier{}).Name())
	r, err := retry.New(retry.WithName("charge"))
	require.NoError(t, err)
	assert.Equal(t, "charge", r.Name())
	r2, err := r.With(retry.WithMaxAttempts(2))
	require.NoError(t, err)
	assert.Equal(t, "charge", r2.Name(), "With keeps the name")
	r3, err := r.With(retry.WithName("refund"))
	require.NoError(t, err)
	assert.Equal(t, "refund", r3.Name())
	assert.Equal(t, "charge", r.Name(), "r is not changed")
}
