package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/idempotency"
	"github.com/steadfast-go/retry/memstore"
	"github.com/steadfast-go/retry/storetest"
)

func TestCheckNotRecorded(t *testing.T) {
	cause := fmt.Errorf("%w: the store timed out", retry.ErrOutcomeNotRecorded)
	require.NoError(t, storetest.CheckNotRecorded(&retry.Error{Outcome: retry.OutcomePermanent, Last: cause}))
	require.NoError(t, storetest.CheckNotRecorded(fmt.Errorf("wrapped: %w", &retry.Error{Outcome: retry.OutcomePermanent, Last: cause})))

	for name, tc := range map[string]struct {
		err  error
		want []string
	}{
		"nil":           {nil, []string{"ErrOutcomeNotRecorded", "no *retry.Error"}},
		"bare cause":    {cause, []string{"no *retry.Error"}},
		"not permanent": {&retry.Error{Outcome: retry.OutcomeExhausted, Last: cause}, []string{"outcome exhausted"}},
		"unavailable only": {
			&retry.Error{Outcome: retry.OutcomePermanent, Last: retry.ErrIdempotencyUnavailable},
			[]string{"does not match retry.ErrOutcomeNotRecorded"},
		},
		"not recorded and unavailable": {
			&retry.Error{Outcome: retry.OutcomePermanent, Last: fmt.Errorf("%w: %w", retry.ErrOutcomeNotRecorded, retry.ErrIdempotencyUnavailable)},
			[]string{"matches retry.ErrIdempotencyUnavailable, which says fn did not run"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := storetest.CheckNotRecorded(tc.err)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestObservedStoreReportsEachComplete(t *testing.T) {
	type call struct {
		key string
		err error
	}
	var calls []call
	s := storetest.ObservedStore{
		Store:         memstore.New(nil),
		AfterComplete: func(key string, err error) { calls = append(calls, call{key, err}) },
	}
	ctx := context.Background()
	cl, err := s.Claim(ctx, "k", "", time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, "k", cl.Token, idempotency.StoredOutcome{}, time.Minute))
	err = s.Complete(ctx, "k", "not the token", idempotency.StoredOutcome{}, time.Minute)
	require.ErrorIs(t, err, idempotency.ErrLeaseLost, "the store's error is returned")
	require.Len(t, calls, 2)
	assert.Equal(t, call{"k", nil}, calls[0])
	assert.Equal(t, "k", calls[1].key)
	assert.True(t, errors.Is(calls[1].err, idempotency.ErrLeaseLost))

	s.AfterComplete = nil
	require.ErrorIs(t, s.Complete(ctx, "k", "not the token", idempotency.StoredOutcome{}, time.Minute), idempotency.ErrLeaseLost, "no hook is fine")
}
