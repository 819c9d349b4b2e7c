package retry_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/storetest"
)

func TestMemoryIdempotencyStoreContract(t *testing.T) {
	mock := clock.NewMock()
	storetest.TestIdempotencyStore(t, storetest.Harness{
		New: func(*testing.T) retry.IdempotencyStore {
			return retry.NewMemoryIdempotencyStore(retry.WithStoreClock(mock))
		},
		Advance: func(_ *testing.T, d time.Duration) { mock.Add(d) },
		Short:   time.Minute,
	})
}

func TestMemoryIdempotencyStoreSweepsExpiredKeys(t *testing.T) {
	mock := clock.NewMock()
	s := retry.NewMemoryIdempotencyStore(retry.WithStoreClock(mock))
	ctx := context.Background()
	for i := range 1000 {
		cl, err := s.Claim(ctx, fmt.Sprint("old-", i), "", time.Second)
		require.NoError(t, err)
		require.Equal(t, retry.ClaimAcquired, cl.Status)
	}
	require.Equal(t, 1000, s.Len())
	mock.Add(2 * time.Second)
	for i := range 100 {
		_, err := s.Claim(ctx, fmt.Sprint("new-", i), "", time.Hour)
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, s.Len(), 100+64, "expired keys were not swept when the store grew")
}

func TestMemoryIdempotencyStoreRejectsBadArguments(t *testing.T) {
	s := retry.NewMemoryIdempotencyStore()
	ctx := context.Background()
	_, err := s.Claim(ctx, "", "", time.Second)
	assert.ErrorIs(t, err, retry.ErrInvalidOption)
	_, err = s.Claim(ctx, "k", "", 0)
	assert.ErrorIs(t, err, retry.ErrInvalidOption)
	cl, err := s.Claim(ctx, "k", "", time.Second)
	require.NoError(t, err)
	assert.ErrorIs(t, s.Complete(ctx, "k", cl.Token, retry.Record{}, -time.Second), retry.ErrInvalidOption)
	assert.ErrorIs(t, s.Renew(ctx, "k", cl.Token, 0), retry.ErrInvalidOption)
}
