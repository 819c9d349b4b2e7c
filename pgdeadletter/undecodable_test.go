package pgdeadletter_test

import (
	"context"
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/pgdeadletter"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPutRefusesUnknownReason: a record whose reason is not a failure
// outcome is refused, naming the problem, and nothing is stored. Put
// stored such a record under a name no reader could decode.
func TestPutRefusesUnknownReason(t *testing.T) {
	s := pgdltest.Sink(t, pgdltest.Pool(t))
	for _, reason := range []retry.Outcome{retry.Outcome(99), retry.OutcomeUnknown + 1, retry.OutcomeSuccess} {
		dl := record("r", "op", reason, time.Now())
		err := s.Put(t.Context(), dl)
		require.ErrorIs(t, err, retry.ErrInvalidOption, "reason %d", reason)
		assert.ErrorContains(t, err, "is not a failure outcome")
		assert.NotContains(t, err.Error(), dl.IdempotencyKey)
		_, err = s.Get(t.Context(), "r")
		assert.ErrorIs(t, err, pgdeadletter.ErrNotFound, "reason %d: nothing stored", reason)
	}
}

// TestUndecodableRowDoesNotStopOthers puts rows that this version cannot
// decode (a reason written by hand, or by a newer version) among good
// records: List returns the good ones with an error naming the bad ones,
// Pending and Redrive go on with the good ones, Get of a good record
// works, and Purge removes the bad ones. One such row made Pending, List
// and Redrive fail for the whole table.
func TestUndecodableRowDoesNotStopOthers(t *testing.T) {
	pool := pgdltest.Pool(t)
	s := pgdltest.Sink(t, pool)
	ctx := t.Context()
	t0 := time.Now().Add(-time.Hour)
	good := []retry.DeadLetter{
		record("a", "op", retry.OutcomeExhausted, t0),
		record("c", "op", retry.OutcomePermanent, t0.Add(2*time.Second)),
	}
	for _, dl := range good {
		require.NoError(t, s.Put(ctx, dl))
	}
	for i, reason := range []string{"vanished", "shed-by-a-newer-version"} {
		_, err := pool.Exec(ctx, "INSERT INTO "+s.Table()+" (id, name, idempotency_key, attempts, gave_up, reason) VALUES ($1, 'op', 'secret-key', 1, $2, $3)",
			[]string{"b", "d"}[i], t0.Add(time.Duration(2*i+1)*time.Second), reason)
		require.NoError(t, err)
	}

	recs, err := s.List(ctx, deadletter.Filter{})
	assert.Equal(t, good, recs, "the good records, in order")
	require.ErrorIs(t, err, pgdeadletter.ErrUndecodable)
	assert.ErrorContains(t, err, "2 skipped")
	assert.ErrorContains(t, err, `b: its reason "vanished" is not an outcome this version knows`)
	assert.ErrorContains(t, err, `d: its reason "shed-by-a-newer-version"`)
	assert.NotContains(t, err.Error(), "secret-key")

	pending, err := s.Pending(ctx)
	require.NoError(t, err)
	assert.Equal(t, good, pending)

	got, err := s.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, good[0], got)
	_, err = s.Get(ctx, "b")
	assert.ErrorIs(t, err, pgdeadletter.ErrUndecodable)

	r, err := retry.New()
	require.NoError(t, err)
	var replayed []string
	rep, err := deadletter.Redrive(ctx, s, r, func(_ context.Context, dl retry.DeadLetter) error {
		replayed = append(replayed, dl.ID)
		return nil
	}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "c"}, replayed)
	assert.Equal(t, 2, rep.Succeeded)

	n, err := s.Purge(ctx, deadletter.Filter{IDs: []string{"b", "d"}})
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	recs, err = s.List(ctx, deadletter.Filter{})
	require.NoError(t, err)
	assert.Len(t, recs, 2)
}
