package pgdeadletter_test

import (
	"testing"
	"time"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
	"github.com/steadfast-go/retry/pgdeadletter"
	"github.com/steadfast-go/retry/pgdeadletter/pgdltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seed stores six records an hour apart, t0 being the oldest, and marks
// r4 for redrive.
func seed(t *testing.T, s *pgdeadletter.Sink) time.Time {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	recs := []retry.DeadLetter{
		record("r0", "charge", retry.OutcomeExhausted, t0),
		record("r1", "charge", retry.OutcomePermanent, t0.Add(1*time.Hour)),
		record("r2", "email", retry.OutcomeExhausted, t0.Add(2*time.Hour)),
		record("r3", "email", retry.OutcomeDeadline, t0.Add(3*time.Hour)),
		record("r4", "charge", retry.OutcomeExhausted, t0.Add(4*time.Hour)),
		record("r5", "ship", retry.OutcomeMaxElapsed, t0.Add(5*time.Hour)),
	}
	// Put out of order: List orders by GaveUp.
	for _, i := range []int{3, 0, 5, 1, 4, 2} {
		require.NoError(t, s.Put(t.Context(), recs[i]))
	}
	ok, err := s.MarkRedriven(t.Context(), "r4")
	require.NoError(t, err)
	require.True(t, ok)
	return t0
}

func ids(recs []retry.DeadLetter) []string {
	out := []string{}
	for _, dl := range recs {
		out = append(out, dl.ID)
	}
	return out
}

func TestListFilters(t *testing.T) {
	s := pgdltest.Sink(t, pgdltest.Pool(t))
	t0 := seed(t, s)
	all, err := s.List(t.Context(), deadletter.Filter{})
	require.NoError(t, err)
	require.Equal(t, []string{"r0", "r1", "r2", "r3", "r4", "r5"}, ids(all))

	cases := []struct {
		name string
		f    deadletter.Filter
		want []string
	}{
		{"name", deadletter.Filter{Name: "charge"}, []string{"r0", "r1", "r4"}},
		{"unknown name", deadletter.Filter{Name: "nope"}, []string{}},
		{"one reason", deadletter.Filter{Reasons: []retry.Outcome{retry.OutcomeExhausted}}, []string{"r0", "r2", "r4"}},
		{"two reasons", deadletter.Filter{Reasons: []retry.Outcome{retry.OutcomeDeadline, retry.OutcomePermanent}}, []string{"r1", "r3"}},
		{"since is inclusive", deadletter.Filter{Since: t0.Add(4 * time.Hour)}, []string{"r4", "r5"}},
		{"until is exclusive", deadletter.Filter{Until: t0.Add(2 * time.Hour)}, []string{"r0", "r1"}},
		{"range", deadletter.Filter{Since: t0.Add(time.Hour), Until: t0.Add(3 * time.Hour)}, []string{"r1", "r2"}},
		{"pending", deadletter.Filter{State: deadletter.Pending}, []string{"r0", "r1", "r2", "r3", "r5"}},
		{"redriven", deadletter.Filter{State: deadletter.Redriven}, []string{"r4"}},
		{"ids", deadletter.Filter{IDs: []string{"r5", "r2", "zz"}}, []string{"r2", "r5"}},
		{"empty ids select nothing", deadletter.Filter{IDs: []string{}}, []string{}},
		{"empty reasons select nothing", deadletter.Filter{Reasons: []retry.Outcome{}}, []string{}},
		{"limit keeps the oldest", deadletter.Filter{Limit: 2}, []string{"r0", "r1"}},
		{"all together", deadletter.Filter{Name: "charge", Reasons: []retry.Outcome{retry.OutcomeExhausted}, State: deadletter.Pending, Since: t0.Add(-time.Hour)}, []string{"r0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.List(t.Context(), c.f)
			require.NoError(t, err)
			assert.Equal(t, c.want, ids(got), "List")
			sel, err := c.f.Select(all)
			require.NoError(t, err)
			assert.Equal(t, c.want, ids(sel), "Select agrees with List")
		})
	}
}

func TestFilterRejectsNonsense(t *testing.T) {
	s := pgdltest.Sink(t, pgdltest.Pool(t))
	now := time.Now()
	for name, f := range map[string]deadletter.Filter{
		"negative limit":    {Limit: -1},
		"since after until": {Since: now, Until: now.Add(-time.Hour)},
		"empty range":       {Since: now, Until: now},
		"success reason":    {Reasons: []retry.Outcome{retry.OutcomeSuccess}},
		"unknown reason":    {Reasons: []retry.Outcome{99}},
		"unknown state":     {State: 7},
	} {
		_, err := s.List(t.Context(), f)
		assert.ErrorIs(t, err, retry.ErrInvalidOption, name)
		_, err = s.Purge(t.Context(), f)
		assert.ErrorIs(t, err, retry.ErrInvalidOption, name)
		_, err = f.Select(nil)
		assert.ErrorIs(t, err, retry.ErrInvalidOption, name)
	}
}

func TestPurge(t *testing.T) {
	s := pgdltest.Sink(t, pgdltest.Pool(t))
	t0 := seed(t, s)
	ctx := t.Context()
	left := func() []string {
		recs, err := s.List(ctx, deadletter.Filter{})
		require.NoError(t, err)
		return ids(recs)
	}

	n, err := s.Purge(ctx, deadletter.Filter{IDs: []string{}})
	require.NoError(t, err)
	assert.Zero(t, n, "an empty selection of IDs purges nothing")
	assert.Len(t, left(), 6)

	n, err = s.Purge(ctx, deadletter.Filter{IDs: []string{"r3", "missing"}})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"r0", "r1", "r2", "r4", "r5"}, left())

	n, err = s.Purge(ctx, deadletter.Filter{State: deadletter.Redriven})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"r0", "r1", "r2", "r5"}, left())

	n, err = s.Purge(ctx, deadletter.Filter{Name: "charge", Until: t0.Add(time.Hour)})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"r1", "r2", "r5"}, left())

	n, err = s.Purge(ctx, deadletter.Filter{Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the two oldest")
	assert.Equal(t, []string{"r5"}, left())

	n, err = s.Purge(ctx, deadletter.Filter{})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Empty(t, left())
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
