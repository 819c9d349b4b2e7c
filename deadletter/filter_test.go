package deadletter_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/steadfast-go/retry"
	"github.com/steadfast-go/retry/deadletter"
)

func record(id, name string, reason retry.Outcome, gaveUp time.Time) retry.DeadLetter {
	return retry.DeadLetter{ID: id, Name: name, Reason: reason, Attempts: 1,
		FirstAttempt: gaveUp.Add(-time.Second), GaveUp: gaveUp, LastError: "boom"}
}

// seedFile stores six records an hour apart, out of order, t0 being the
// oldest, and marks r4 as redriven.
func seedFile(t *testing.T) (*deadletter.FileSink, string, time.Time) {
	t.Helper()
	s, path := openFileSink(t, nil)
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	recs := []retry.DeadLetter{
		record("r0", "charge", retry.OutcomeExhausted, t0),
		record("r1", "charge", retry.OutcomePermanent, t0.Add(1*time.Hour)),
		record("r2", "email", retry.OutcomeExhausted, t0.Add(2*time.Hour)),
		record("r3", "email", retry.OutcomeDeadline, t0.Add(3*time.Hour)),
		record("r4", "charge", retry.OutcomeExhausted, t0.Add(4*time.Hour)),
		record("r5", "ship", retry.OutcomeMaxElapsed, t0.Add(5*time.Hour)),
	}
	for _, i := range []int{3, 0, 5, 1, 4, 2} {
		require.NoError(t, s.Put(t.Context(), recs[i]))
	}
	ok, err := s.MarkRedriven(t.Context(), "r4")
	require.NoError(t, err)
	require.True(t, ok)
	return s, path, t0
}

func ids(recs []retry.DeadLetter) []string {
	out := []string{}
	for _, dl := range recs {
		out = append(out, dl.ID)
	}
	return out
}

func TestFilterSelectAndFileList(t *testing.T) {
	t.Parallel()
	s, path, t0 := seedFile(t)
	all, err := s.List(t.Context(), deadletter.Filter{})
	require.NoError(t, err)
	require.Equal(t, []string{"r0", "r1", "r2", "r3", "r4", "r5"}, ids(all), "oldest first, whatever the order written")
	unordered, err := deadletter.ReadFile(path)
	require.NoError(t, err)

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
			sel, err := c.f.Select(unordered)
			require.NoError(t, err)
			assert.Equal(t, c.want, ids(sel), "Select")
			for _, dl := range unordered {
				if c.f.Limit == 0 {
					assert.Equal(t, slices.Contains(c.want, dl.ID), c.f.Match(dl), "Match(%s)", dl.ID)
				}
			}
		})
	}
}

func TestFilterRejectsNonsense(t *testing.T) {
	t.Parallel()
	s, _ := openFileSink(t, nil)
	now := time.Now()
	for name, f := range map[string]deadletter.Filter{
		"negative limit":    {Limit: -1},
		"since after until": {Since: now, Until: now.Add(-time.Hour)},
		"empty range":       {Since: now, Until: now},
		"success reason":    {Reasons: []retry.Outcome{retry.OutcomeSuccess}},
		"unknown reason":    {Reasons: []retry.Outcome{99}},
		"unknown state":     {State: 7},
	} {
		assert.ErrorIs(t, f.Validate(), retry.ErrInvalidOption, name)
		_, err := f.Select(nil)
		assert.ErrorIs(t, err, retry.ErrInvalidOption, name)
		_, err = s.List(t.Context(), f)
		assert.ErrorIs(t, err, retry.ErrInvalidOption, name)
		_, err = s.Purge(t.Context(), f)
		assert.ErrorIs(t, err, retry.ErrInvalidOption, name)
	}
}

func TestFileSinkListReportsTornLines(t *testing.T) {
	t.Parallel()
	s, path, _ := seedFile(t)
	appendRaw(t, path, `{"id":"torn`)
	got, err := s.List(t.Context(), deadletter.Filter{Name: "email"})
	var torn *deadletter.TornRecordError
	require.ErrorAs(t, err, &torn, "the records come with the torn lines' report")
	assert.Len(t, torn.Offsets, 1)
	assert.Equal(t, []string{"r2", "r3"}, ids(got))
}

func appendRaw(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestFileSinkPurge(t *testing.T) {
	t.Parallel()
	s, path, t0 := seedFile(t)
	appendRaw(t, path, "{\"torn\n") // kept byte for byte
	ctx := t.Context()
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	left := func() []string {
		recs, err := s.List(ctx, deadletter.Filter{})
		var torn *deadletter.TornRecordError
		if !assert.ErrorAs(t, err, &torn) {
			require.NoError(t, err)
		}
		return ids(recs)
	}

	n, err := s.Purge(ctx, deadletter.Filter{IDs: []string{}})
	require.NoError(t, err)
	assert.Zero(t, n, "an empty selection of IDs purges nothing")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after, "nothing selected, nothing rewritten")

	n, err = s.Purge(ctx, deadletter.Filter{IDs: []string{"r3", "missing"}})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"r0", "r1", "r2", "r4", "r5"}, left())

	// Purging the redriven record drops its redrive marker too.
	n, err = s.Purge(ctx, deadletter.Filter{State: deadletter.Redriven})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"r0", "r1", "r2", "r5"}, left())
	after, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(after), `"r4"`)
	assert.NotContains(t, string(after), `"r3"`)
	assert.Contains(t, string(after), "{\"torn\n", "the torn line is kept")
	for line := range bytes.Lines(after) {
		assert.Contains(t, string(before), string(line), "kept lines are unchanged")
	}
	ok, err := s.MarkRedriven(ctx, "r4")
	require.NoError(t, err)
	assert.False(t, ok, "a purged record cannot be marked")

	// The sink appends to the new file.
	require.NoError(t, s.Put(ctx, record("r6", "ship", retry.OutcomeExhausted, t0.Add(6*time.Hour))))
	assert.Equal(t, []string{"r0", "r1", "r2", "r5", "r6"}, left())
	ok, err = s.MarkRedriven(ctx, "r6")
	require.NoError(t, err)
	assert.True(t, ok)

	n, err = s.Purge(ctx, deadletter.Filter{Name: "charge", Until: t0.Add(time.Hour)})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []string{"r1", "r2", "r5", "r6"}, left())

	n, err = s.Purge(ctx, deadletter.Filter{Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the two oldest")
	assert.Equal(t, []string{"r5", "r6"}, left())

	n, err = s.Purge(ctx, deadletter.Filter{})
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Empty(t, left())
	after, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "{\"torn\n", string(after))

	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the file keeps its permissions")
	tmp, err := filepath.Glob(filepath.Join(filepath.Dir(path), "*.purge-*"))
	require.NoError(t, err)
	assert.Empty(t, tmp, "no temporary file is left behind")

	require.NoError(t, s.Close())
	_, err = s.Purge(ctx, deadletter.Filter{})
	assert.ErrorIs(t, err, os.ErrClosed)
}
