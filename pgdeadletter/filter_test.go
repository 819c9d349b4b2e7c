package pgdeadletter_test

import (
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ids(recs []retry.DeadLetter) []string {
	out := []string{}
	for _, dl := range recs {
		out = append(out, dl.ID)
	}
	return out
}

// TestListAgreesWithSelectAtTheEdges runs List and Purge with bounds on
// each side of stored (whole-microsecond) times, within the microsecond,
// and with names and IDs that no stored record can have: both select
// what Filter.Select selects from the stored records. pgx truncated a
// bound to the microsecond, so a record in the bound's microsecond came
// out the other way round, and a name or ID with invalid UTF-8 or a NUL
// failed with a server error quoting the byte.
func TestListAgreesWithSelectAtTheEdges(t *testing.T) {
	s := pgdltest.Sink(t, pgdltest.Pool(t))
	ctx := t.Context()
	base := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	early := time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC) // before the Unix epoch
	recs := []retry.DeadLetter{
		record("early", "op", retry.OutcomeExhausted, early),
		record("before", "op", retry.OutcomeExhausted, base.Add(-time.Microsecond)),
		record("at", "op", retry.OutcomeExhausted, base),
		record("after", "op", retry.OutcomeExhausted, base.Add(time.Microsecond)),
		record("bad name", "op\xff", retry.OutcomeExhausted, base), // stored as "op\uFFFD"
	}
	put := func() {
		for _, dl := range recs {
			require.NoError(t, s.Put(ctx, dl))
		}
	}
	put()
	all, err := s.List(ctx, deadletter.Filter{})
	require.NoError(t, err)
	require.Len(t, all, len(recs))

	var filters []deadletter.Filter
	for _, at := range []time.Time{base, early} {
		for _, d := range []time.Duration{-time.Microsecond - 1, -time.Microsecond, -999, -1, 0, 1, 500, 999, time.Microsecond, time.Microsecond + 1} {
			filters = append(filters, deadletter.Filter{Since: at.Add(d)}, deadletter.Filter{Until: at.Add(d)})
		}
	}
	filters = append(filters,
		deadletter.Filter{Since: base.Add(1), Until: base.Add(999)}, // no whole microsecond between
		deadletter.Filter{Since: base.Add(-1), Until: base.Add(1)},
		deadletter.Filter{Name: "op\xff"},
		deadletter.Filter{Name: "op\x00"},
		deadletter.Filter{Name: "op\uFFFD"},
		deadletter.Filter{IDs: []string{"at", "b\x00"}},
		deadletter.Filter{IDs: []string{"\xff"}},
		deadletter.Filter{IDs: []string{"at\xff", "after"}, Name: "op"},
	)
	for _, f := range filters {
		want, err := f.Select(all)
		require.NoError(t, err)
		got, err := s.List(ctx, f)
		require.NoError(t, err, "List %+v", f)
		assert.Equal(t, ids(want), ids(got), "List %+v", f)
		n, err := s.Purge(ctx, f)
		require.NoError(t, err, "Purge %+v", f)
		assert.Equal(t, len(want), n, "Purge %+v", f)
		put()
	}
}
