package idempotency_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/steadfast-go/retry/idempotency"
)

func TestClaimStatus_String(t *testing.T) {
	assert.Equal(t, "acquired", idempotency.ClaimAcquired.String())
	assert.Equal(t, "held", idempotency.ClaimHeld.String())
	assert.Equal(t, "completed", idempotency.ClaimCompleted.String())
	assert.Equal(t, "unknown", idempotency.ClaimStatus(0).String())
}
